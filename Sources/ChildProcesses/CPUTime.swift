import Foundation
import Glibc

/// CPU-time readings for the report.
package enum CPUTime {
    /// Seconds of CPU the calling thread has used (`CLOCK_THREAD_CPUTIME_ID`).
    package static func thread() -> Double { read(CLOCK_THREAD_CPUTIME_ID) }

    /// Seconds of CPU this process has used, all threads (`CLOCK_PROCESS_CPUTIME_ID`).
    package static func process() -> Double { read(CLOCK_PROCESS_CPUTIME_ID) }

    /// Seconds of CPU process `pid` has used, all its threads (those gone too), or 0 once it is gone: read from its
    /// CPU-time clock (`clock_getcpuclockid`, nanoseconds), else from /proc/<pid>/stat (utime + stime, 10 ms ticks).
    package static func process(_ pid: Int32) -> Double {
        var clock = clockid_t()
        var time = timespec()
        if clock_getcpuclockid(pid, &clock) == 0 && clock_gettime(clock, &time) == 0 {
            return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
        }
        guard let fields = statFields(pid), fields.count > 12, let user = Double(fields[11]),
            let system = Double(fields[12])
        else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Seconds of CPU process `pid` and its children have used: its own, the children it reaped (cutime + cstime
    /// in /proc/<pid>/stat) and those still running (listed in /proc/<pid>/task/*/children, whichever of its
    /// threads started them). A supervisor's tree: its workers, the ones ended and reaped included.
    package static func processTree(_ pid: Int32) -> Double {
        var total = process(pid)
        if let fields = statFields(pid), fields.count > 14, let user = Double(fields[13]),
            let system = Double(fields[14])
        {
            total += (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
        }
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        for task in tasks {
            guard let text = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/children", encoding: .utf8)
            else { continue }
            for child in text.split(separator: " ").compactMap({ Int32($0) }) { total += process(child) }
        }
        return total
    }

    /// The fields of /proc/<pid>/stat after the command name (which may hold spaces), nil once it is gone.
    private static func statFields(_ pid: Int32) -> [Substring]? {
        guard let file = fopen("/proc/\(pid)/stat", "r") else { return nil }
        defer { fclose(file) }
        var buffer = [CChar](repeating: 0, count: 1024)
        guard fgets(&buffer, Int32(buffer.count), file) != nil else { return nil }
        let text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard let close = text.lastIndex(of: ")") else { return nil }
        return text[text.index(after: close)...].split(separator: " ")
    }

    /// Monotonic wall-clock seconds.
    package static func wall() -> Double { read(CLOCK_MONOTONIC) }

    private static func read(_ clock: clockid_t) -> Double {
        var time = timespec()
        clock_gettime(clock, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }
}
