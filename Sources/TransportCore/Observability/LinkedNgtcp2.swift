import Glibc

/// What the system's package database says about the ngtcp2 library this process links, read once.
///
/// ngtcp2 0.12.1 as released overflows its stack when it logs a peer's transport parameters to qlog
/// (CVE-2026-40170); Debian's `0.12.1+dfsg-1+deb12u1` carries the fix. A peer can reach the bug as soon as a qlog
/// writer is set, so qlog is refused when the package database shows an older `libngtcp2-9`. A library that no
/// package installed (built from source) is not checked.
enum LinkedNgtcp2 {
    /// The first Debian version of `libngtcp2-9` with the CVE-2026-40170 fix.
    static let firstFixedVersion = "0.12.1+dfsg-1+deb12u1"

    /// Why qlog must stay off, or nil when it may be enabled.
    static let qlogRefusal: String? = refusal(installedVersion: installedVersion())

    static func refusal(installedVersion: String?) -> String? {
        guard let installedVersion, DebianVersion.compare(installedVersion, firstFixedVersion) < 0 else { return nil }
        return "qlog is refused: the installed libngtcp2-9 \(installedVersion) lacks the fix for CVE-2026-40170 "
            + "(a peer can overflow the stack when qlog is on); upgrade it to \(firstFixedVersion) or later"
    }

    /// The version of the installed `libngtcp2-9` package, from dpkg's status file (nil: not installed by dpkg).
    static func installedVersion(statusFile: String = "/var/lib/dpkg/status") -> String? {
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
                inPackage = text.dropFirst(9) == "libngtcp2-9"
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

/// Debian version ordering (`[epoch:]upstream[-revision]`, `~` sorting before everything), as dpkg compares.
enum DebianVersion {
    /// Negative, zero or positive as `a` sorts before, equal to or after `b`.
    static func compare(_ a: String, _ b: String) -> Int {
        let (epochA, upstreamA, revisionA) = split(a)
        let (epochB, upstreamB, revisionB) = split(b)
        if epochA != epochB { return epochA < epochB ? -1 : 1 }
        let upstream = compareParts(Array(upstreamA.utf8), Array(upstreamB.utf8))
        return upstream != 0 ? upstream : compareParts(Array(revisionA.utf8), Array(revisionB.utf8))
    }

    private static func split(_ version: String) -> (Int, Substring, Substring) {
        var rest = Substring(version)
        var epoch = 0
        if let colon = rest.firstIndex(of: ":") {
            epoch = Int(rest[..<colon]) ?? 0
            rest = rest[rest.index(after: colon)...]
        }
        guard let dash = rest.lastIndex(of: "-") else { return (epoch, rest, "") }
        return (epoch, rest[..<dash], rest[rest.index(after: dash)...])
    }

    /// dpkg's `verrevcmp`: alternating non-digit runs (compared by `order`) and digit runs (compared as numbers).
    private static func compareParts(_ a: [UInt8], _ b: [UInt8]) -> Int {
        var i = 0
        var j = 0
        func isDigit(_ c: UInt8) -> Bool { c >= 48 && c <= 57 }
        func order(_ c: UInt8?) -> Int {
            guard let c else { return 0 }
            if isDigit(c) { return 0 }
            if (c >= 65 && c <= 90) || (c >= 97 && c <= 122) { return Int(c) }
            if c == UInt8(ascii: "~") { return -1 }
            return Int(c) + 256
        }
        while i < a.count || j < b.count {
            while (i < a.count && !isDigit(a[i])) || (j < b.count && !isDigit(b[j])) {
                let left = order(i < a.count ? a[i] : nil)
                let right = order(j < b.count ? b[j] : nil)
                if left != right { return left - right }
                i += 1
                j += 1
            }
            while i < a.count && a[i] == 48 { i += 1 }
            while j < b.count && b[j] == 48 { j += 1 }
            var firstDifference = 0
            while i < a.count && isDigit(a[i]) && j < b.count && isDigit(b[j]) {
                if firstDifference == 0 { firstDifference = Int(a[i]) - Int(b[j]) }
                i += 1
                j += 1
            }
            if i < a.count && isDigit(a[i]) { return 1 }
            if j < b.count && isDigit(b[j]) { return -1 }
            if firstDifference != 0 { return firstDifference }
        }
        return 0
    }
}
