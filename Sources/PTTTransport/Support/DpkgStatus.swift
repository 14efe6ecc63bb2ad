import Glibc

/// What dpkg says is installed: its status file, read when a check of a linked library's revision needs it
/// (`QlogSafety`, `GnuTLSSafety`).
enum DpkgStatus {
    /// dpkg's status file on Debian and its derivatives.
    static let defaultFile = "/var/lib/dpkg/status"

    /// The version of an installed package, from dpkg's status file at `statusFile` (nil: not installed by dpkg,
    /// or no such file).
    static func installedVersion(package name: String, statusFile: String = defaultFile) -> String? {
        guard let file = fopen(statusFile, "r") else { return nil }
        defer { fclose(file) }
        var line: UnsafeMutablePointer<CChar>?
        var capacity = 0
        defer { free(line) }
        var inPackage = false
        var installed = false
        var version: String?
        while getline(&line, &capacity, file) > 0, let line {
            let text = String(cString: line).trimmingSuffixNewline
            if text.isEmpty {
                if inPackage, installed, let version { return version }
                inPackage = false
                installed = false
                version = nil
            } else if text.hasPrefix("Package: ") {
                inPackage = text.dropFirst(9) == name
            } else if inPackage, text.hasPrefix("Status: ") {
                installed = text.hasSuffix(" installed")
            } else if inPackage, text.hasPrefix("Version: ") {
                version = String(text.dropFirst(9))
            }
        }
        return inPackage && installed ? version : nil
    }
}

extension String {
    fileprivate var trimmingSuffixNewline: String { hasSuffix("\n") ? String(dropLast()) : self }
}
