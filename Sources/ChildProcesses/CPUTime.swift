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
        guard let file = fopen("/proc/\(pid)/stat", "r") else { return 0 }
        defer { fclose(file) }
        var buffer = [CChar](repeating: 0, count: 1024)
        guard fgets(&buffer, Int32(buffer.count), file) != nil else { return 0 }
        let text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        // Fields after the command name (which may hold spaces) start after the last ')'.
        guard let close = text.lastIndex(of: ")") else { return 0 }
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Monotonic wall-clock seconds.
    package static func wall() -> Double { read(CLOCK_MONOTONIC) }

    private static func read(_ clock: clockid_t) -> Double {
        var time = timespec()
        clock_gettime(clock, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }
}
