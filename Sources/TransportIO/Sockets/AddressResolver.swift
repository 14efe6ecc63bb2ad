import Glibc
import TransportCore

/// Turns `host` + `port` into socket addresses: numeric hosts directly, names through getaddrinfo.
package enum AddressResolver {
    package static func resolve(host: String, port: UInt16) throws(TransportError) -> [SocketAddress] {
        if let numeric = SocketAddress(host: host, port: port) { return [numeric] }
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_DGRAM.rawValue)
        var result: UnsafeMutablePointer<addrinfo>?
        let rv = getaddrinfo(host, String(port), &hints, &result)
        guard rv == 0, let first = result else {
            let text = rv == 0 ? "no address" : String(cString: gai_strerror(rv))
            throw TransportError(.unreachable, "cannot resolve \(host): \(text)")
        }
        defer { freeaddrinfo(first) }
        var addresses: [SocketAddress] = []
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let entry = cursor {
            if let addr = entry.pointee.ai_addr {
                let address = SocketAddress(copying: addr, length: entry.pointee.ai_addrlen)
                if !addresses.contains(address) { addresses.append(address) }
            }
            cursor = entry.pointee.ai_next
        }
        return addresses
    }
}
