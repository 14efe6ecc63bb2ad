import Foundation
import Glibc

/// TCP connections that never start TLS (a Slowloris attacker), from a chosen 127.0.0.0/8 source address, and a
/// way to see which ones the server closed. Non-blocking sockets and `poll` only: nothing here blocks a thread.
final class SilentTCP {
    /// The open descriptors, in connection order.
    private(set) var descriptors: [Int32] = []

    deinit { closeAll() }

    /// Opens `count` connections to 127.0.0.1:`port` from `source` (any 127.x.y.z address) and returns once each
    /// connect completed (the kernel finishes the TCP handshake before the server accepts). Connections whose
    /// connect failed are not kept; the number kept is returned.
    @discardableResult
    func open(_ count: Int, port: UInt16, from source: String = "127.0.0.1", host: String = "127.0.0.1") -> Int {
        var opened = 0
        for _ in 0..<count {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { break }
            var local = Self.address(source, port: 0)
            var target = Self.address(host, port: port)
            let bound = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            let connected =
                bound == 0
                && withUnsafePointer(to: &target) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                    }
                } == 0
            guard connected else {
                Glibc.close(fd)
                continue
            }
            descriptors.append(fd)
            opened += 1
        }
        return opened
    }

    /// Whether the server closed or reset connection `index` (a FIN or RST arrived; nothing else is expected).
    func isClosedByServer(_ index: Int) -> Bool {
        let fd = descriptors[index]
        // FIN makes the socket readable; RST sets POLLERR/POLLHUP, which poll always reports.
        var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&descriptor, 1, 0) > 0 else { return false }
        var byte: UInt8 = 0
        let count = recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        return count == 0 || (count < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
    }

    /// The indices of the connections the server closed so far.
    var closedByServer: [Int] { descriptors.indices.filter(isClosedByServer) }

    /// Waits (polling every 20 ms, up to `limit`) until `condition` holds on the closed indices; returns them.
    func waitForClosed(within limit: Duration, until condition: ([Int]) -> Bool) async -> [Int] {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: limit)
        var closed = closedByServer
        while !condition(closed) && clock.now < deadline {
            try? await Task.sleep(for: .milliseconds(20))
            closed = closedByServer
        }
        return closed
    }

    /// Closes connection `index` from our side (the server sees EOF).
    func close(_ index: Int) {
        guard descriptors[index] >= 0 else { return }
        Glibc.close(descriptors[index])
        descriptors[index] = -1
    }

    func closeAll() {
        for index in descriptors.indices { close(index) }
    }

    static func address(_ host: String, port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr(host)
        return address
    }
}
