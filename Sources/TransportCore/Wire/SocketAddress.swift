import Glibc

/// An IPv4 or IPv6 socket address (address + port), stored in a `sockaddr_in6` (an IPv4 `sockaddr_in` in its
/// first bytes).
///
/// The core needs addresses for ngtcp2 paths and token binding but never opens a socket; the I/O layer uses the
/// same type for `bind`, `connect` and `recvmsg`. Not the kernel's 128-byte `sockaddr_storage`: an address is
/// copied several times per packet (received, routed, handed to the core, queued with each packet sent), and 28
/// bytes are all an IP address takes.
package struct SocketAddress: Hashable, Sendable, CustomStringConvertible {
    package private(set) var storage = sockaddr_in6()
    package private(set) var length: socklen_t = 0
    /// The longest address it holds (`sockaddr_in6`).
    package static let capacity = MemoryLayout<sockaddr_in6>.size

    /// Parses a numeric host (`127.0.0.1`, `::1`, `[::1]`) and a port. Host names are not resolved here.
    package init?(host: String, port: UInt16) {
        var host = host
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        var v4 = in_addr()
        var v6 = in6_addr()
        if inet_pton(AF_INET, host, &v4) == 1 {
            self.init(v4, port: port)
        } else if inet_pton(AF_INET6, host, &v6) == 1 {
            self.init(v6, port: port)
        } else {
            return nil
        }
    }

    /// An IPv4 (`in_addr`) or IPv6 (`in6_addr`) address and a port; every other field zero.
    private init<Address>(_ address: Address, port: UInt16) {
        let isIPv6 = MemoryLayout<Address>.size == MemoryLayout<in6_addr>.size
        let portOffset = MemoryLayout<sockaddr_in>.offset(of: \.sin_port)!  // the same in sockaddr_in6
        let addressOffset =
            isIPv6
            ? MemoryLayout<sockaddr_in6>.offset(of: \.sin6_addr)! : MemoryLayout<sockaddr_in>.offset(of: \.sin_addr)!
        withUnsafeMutableBytes(of: &storage) { raw in
            raw.storeBytes(of: sa_family_t(isIPv6 ? AF_INET6 : AF_INET), as: sa_family_t.self)
            raw.storeBytes(of: port.bigEndian, toByteOffset: portOffset, as: UInt16.self)
            withUnsafeBytes(of: address) {
                raw.baseAddress!.advanced(by: addressOffset).copyMemory(from: $0.baseAddress!, byteCount: $0.count)
            }
        }
        length = socklen_t(isIPv6 ? MemoryLayout<sockaddr_in6>.size : MemoryLayout<sockaddr_in>.size)
    }

    /// Parses `HOST:PORT` where HOST is numeric; IPv6 hosts are written in brackets (`[::1]:4433`).
    package init?(parsing text: String) {
        guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]) else {
            return nil
        }
        self.init(host: String(text[..<colon]), port: port)
    }

    /// Copies a kernel address of `length` bytes; one longer than an IPv6 address (another family) is left empty,
    /// as an address the kernel did not report.
    package init<T>(copying address: UnsafePointer<T>, length: socklen_t) {
        guard Int(length) <= Self.capacity else { return }
        withUnsafeMutableBytes(of: &storage) { dest in
            dest.copyMemory(from: UnsafeRawBufferPointer(start: address, count: Int(length)))
        }
        self.length = length
    }

    /// An empty address (family unspecified); used where the kernel reported none.
    package init() {}

    package var family: Int32 { Int32(storage.sin6_family) }
    package var isIPv6: Bool { family == AF_INET6 }

    /// The port in host byte order.
    package var port: UInt16 {
        withUnsafeBytes(of: storage) { raw in
            switch family {
            case AF_INET: return UInt16(bigEndian: raw.load(as: sockaddr_in.self).sin_port)
            case AF_INET6: return UInt16(bigEndian: raw.load(as: sockaddr_in6.self).sin6_port)
            default: return 0
            }
        }
    }

    /// The numeric host without port (`127.0.0.1`, `::1`).
    package var host: String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        withUnsafeBytes(of: storage) { raw in
            switch family {
            case AF_INET:
                var addr = raw.load(as: sockaddr_in.self).sin_addr
                _ = inet_ntop(AF_INET, &addr, &buffer, socklen_t(buffer.count))
            case AF_INET6:
                var addr = raw.load(as: sockaddr_in6.self).sin6_addr
                _ = inet_ntop(AF_INET6, &addr, &buffer, socklen_t(buffer.count))
            default: break
            }
        }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The address bytes only (4 or 16), without port: what an address-validation token is bound to.
    package var addressBytes: [UInt8] {
        withUnsafeBytes(of: storage) { raw in
            switch family {
            case AF_INET: return withUnsafeBytes(of: raw.load(as: sockaddr_in.self).sin_addr) { Array($0) }
            case AF_INET6: return withUnsafeBytes(of: raw.load(as: sockaddr_in6.self).sin6_addr) { Array($0) }
            default: return []
            }
        }
    }

    /// The same address with another port.
    package func with(port: UInt16) -> SocketAddress {
        // Straight from the stored address: the UDP receive path calls this for every packet, and formatting and
        // re-parsing the host text cost more than the rest of the call.
        withUnsafeBytes(of: storage) { raw in
            switch family {
            case AF_INET: return SocketAddress(raw.load(as: sockaddr_in.self).sin_addr, port: port)
            case AF_INET6: return SocketAddress(raw.load(as: sockaddr_in6.self).sin6_addr, port: port)
            default: return self
            }
        }
    }

    package var description: String { isIPv6 ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// The address in a kernel `sockaddr_storage` (for C APIs that take an array of them).
    package var kernelStorage: sockaddr_storage {
        var kernel = sockaddr_storage()
        withUnsafeMutableBytes(of: &kernel) { dest in
            withBytes { dest.copyMemory(from: $0) }
        }
        return kernel
    }

    /// Calls `body` with a `sockaddr` pointer and its length, as C APIs expect.
    package func withSockAddr<R, E: Error>(_ body: (UnsafePointer<sockaddr>, socklen_t) throws(E) -> R) throws(E) -> R {
        try withUnsafeBytes(of: storage) { raw throws(E) in
            try body(raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), length)
        }
    }

    // Equality and hashing read the address bytes in place: they run per packet (no array per comparison).
    package static func == (lhs: SocketAddress, rhs: SocketAddress) -> Bool {
        guard lhs.length == rhs.length else { return false }
        return lhs.withBytes { left in rhs.withBytes { right in left.elementsEqual(right) } }
    }

    package func hash(into hasher: inout Hasher) { withBytes { hasher.combine(bytes: $0) } }

    private func withBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        withUnsafeBytes(of: storage) { body(UnsafeRawBufferPointer(rebasing: $0.prefix(Int(length)))) }
    }
}
