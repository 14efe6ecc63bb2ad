import Foundation
import Glibc
import TransportCore
import TransportIO

/// The TCP side of ``ReadinessBalancer``: a listener on the virtual address's port; each accepted connection is
/// joined to a new connection to the relay the balancer chooses (one with a TCP address), bytes copied both ways
/// on a thread of its own until either side ends. No ready relay: the connection is closed at once.
final class BalancerTCPSplice: Sendable {
    let fd: Int32

    /// Listens on `address` (the UDP side's, so both share one port).
    init(address: SocketAddress) throws(TransportError) {
        let fd = try systemCall("socket") {
            socket(address.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        }
        do throws(TransportError) {
            var on: Int32 = 1
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
            try address.withSockAddr { raw, length throws(TransportError) in
                _ = try systemCall("bind(tcp \(address))") { bind(fd, raw, length) }
            }
            _ = try systemCall("listen") { listen(fd, 128) }
        } catch {
            Glibc.close(fd)
            throw error
        }
        self.fd = fd
    }

    /// Accepts until the balancer stops, then closes the listener (spliced connections end with their peers).
    func run(_ balancer: ReadinessBalancer) {
        while !balancer.stopped {
            var watched = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0)]
            guard poll(&watched, 1, 50) > 0 else { continue }
            var storage = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let client = withUnsafeMutablePointer(to: &storage) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { accept(fd, $0, &length) }
            }
            guard client >= 0 else { continue }
            _ = fcntl(client, F_SETFD, FD_CLOEXEC)
            let from = withUnsafePointer(to: &storage) { SocketAddress(copying: $0, length: length) }
            guard let index = balancer.choose(tcp: true, client: from), let relay = balancer.backends[index].tcp,
                let upstream = Self.connect(relay)
            else {
                Glibc.close(client)
                continue
            }
            Thread { Self.copy(client, upstream, until: balancer) }.start()
        }
        Glibc.close(fd)
    }

    private static func connect(_ relay: SocketAddress) -> Int32? {
        let upstream = socket(relay.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard upstream >= 0 else { return nil }
        guard relay.withSockAddr({ Glibc.connect(upstream, $0, $1) }) == 0 else {
            Glibc.close(upstream)
            return nil
        }
        return upstream
    }

    /// Copies bytes between the two sockets until either ends or fails, or the balancer stops; closes both.
    private static func copy(_ one: Int32, _ other: Int32, until balancer: ReadinessBalancer) {
        defer {
            Glibc.close(one)
            Glibc.close(other)
        }
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while !balancer.stopped {
            var watched = [
                pollfd(fd: one, events: Int16(POLLIN), revents: 0),
                pollfd(fd: other, events: Int16(POLLIN), revents: 0),
            ]
            guard poll(&watched, 2, 50) > 0 else { continue }
            for (from, to) in [(watched[0], other), (watched[1], one)] where from.revents != 0 {
                let count = recv(from.fd, &buffer, buffer.count, 0)
                guard count > 0 else { return }
                var sent = 0
                while sent < count {
                    let written = buffer[sent..<count].withUnsafeBytes {
                        send(to, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
                    }
                    guard written > 0 else { return }
                    sent += written
                }
            }
        }
    }
}
