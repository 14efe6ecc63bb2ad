import Foundation

/// VmRSS (resident now) and VmHWM (the most ever resident) from /proc/<pid>/status.
package enum ResidentMemory {
    /// `process` is a pid or `self`; nil when the file cannot be read.
    package static func kib(ofProcess process: String) -> Int? {
        status(of: process).flatMap { kib(fromStatus: $0) }
    }

    /// Resets the process's peak resident set (VmHWM) to what is resident now (Linux: 5 to /proc/PID/clear_refs).
    package static func resetPeak(ofProcess process: String) {
        try? "5".write(toFile: "/proc/\(process)/clear_refs", atomically: false, encoding: .utf8)
    }

    /// The process's peak resident set (VmHWM) so far: what a burst cost even after it was freed.
    package static func peakKiB(ofProcess process: String) -> Int? {
        status(of: process).flatMap { kib(fromStatus: $0, field: "VmHWM") }
    }

    /// Parses the `VmRSS:   1234 kB` line (or another `field`'s).
    package static func kib(fromStatus status: String, field: String = "VmRSS") -> Int? {
        for line in status.split(separator: "\n") where line.hasPrefix("\(field):") {
            return line.split(separator: " ").dropFirst().lazy.compactMap { Int($0) }.first
        }
        return nil
    }

    private static func status(of process: String) -> String? {
        try? String(contentsOfFile: "/proc/\(process)/status", encoding: .utf8)
    }
}
