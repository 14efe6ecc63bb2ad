import Foundation

/// VmRSS from /proc/<pid>/status.
package enum ResidentMemory {
    /// `process` is a pid or `self`; nil when the file cannot be read.
    package static func kib(ofProcess process: String) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(process)/status", encoding: .utf8) else { return nil }
        return kib(fromStatus: status)
    }

    /// Parses the `VmRSS:   1234 kB` line.
    package static func kib(fromStatus status: String) -> Int? {
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return line.split(separator: " ").dropFirst().lazy.compactMap { Int($0) }.first
        }
        return nil
    }
}
