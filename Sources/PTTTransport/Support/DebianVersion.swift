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

    /// The upstream part without a Debian repack suffix: "0.12.1" for "0.12.1+dfsg-1+deb12u1".
    static func upstream(_ version: String) -> String {
        let upstream = split(version).1
        return String(upstream.prefix { $0 != "+" && $0 != "~" })
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
