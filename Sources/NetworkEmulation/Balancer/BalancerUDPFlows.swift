import Foundation
import Glibc
import TransportCore
import TransportIO

/// The UDP side of ``ReadinessBalancer``: the virtual address's socket and one connected socket per flow towards
/// its relay. A datagram from a client address the balancer has not seen opens a flow to the relay the balancer
/// chooses; the relay's answers go back from the virtual address. A flow idle for `idleLimit` is forgotten.
final class BalancerUDPFlows: @unchecked Sendable {
    // @unchecked Sendable invariant: `flows` and `clients` are used only by the thread running `run`; `fd` and
    // `address` never change.
    let fd: Int32
    let address: SocketAddress
    private var flows: [SocketAddress: Flow] = [:]
    /// A flow's socket → its client.
    private var clients: [Int32: SocketAddress] = [:]

    private struct Flow {
        var fd: Int32
        var lastSeen: ContinuousClock.Instant
    }

    static let idleLimit: Duration = .seconds(60)

    /// Binds the virtual address on `host`, a port the kernel picks.
    init(host: String) throws(TransportError) {
        guard let local = SocketAddress(host: host, port: 0) else {
            throw TransportError(.invalidConfiguration, "balancer: \(host) is not a numeric host")
        }
        let fd = try systemCall("socket") {
            socket(local.family, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        }
        do throws(TransportError) {
            try local.withSockAddr { address, length throws(TransportError) in
                _ = try systemCall("bind(\(local))") { bind(fd, address, length) }
            }
            address = try Self.localAddress(of: fd)
        } catch {
            Glibc.close(fd)
            throw error
        }
        self.fd = fd
    }

    func close() { Glibc.close(fd) }

    /// Forwards until the balancer stops, then closes every socket.
    func run(_ balancer: ReadinessBalancer) {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        var lastSweep = ContinuousClock.now
        while !balancer.stopped {
            var watched = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0)]
            watched += clients.keys.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            guard poll(&watched, nfds_t(watched.count), 50) > 0 else { continue }
            for entry in watched where entry.revents != 0 {
                if entry.fd == fd {
                    fromClients(balancer, &buffer)
                } else {
                    fromRelay(entry.fd, balancer, &buffer)
                }
            }
            if ContinuousClock.now - lastSweep > .seconds(1) {
                lastSweep = ContinuousClock.now
                forgetIdleFlows()
            }
        }
        for flow in flows.values { Glibc.close(flow.fd) }
        close()
    }

    /// Every datagram waiting at the virtual address, each to its flow's relay (a new flow's chosen now).
    private func fromClients(_ balancer: ReadinessBalancer, _ buffer: inout [UInt8]) {
        var forwarded = 0
        defer { balancer.count(datagramsIn: forwarded) }
        for _ in 0..<256 {
            var storage = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let count = withUnsafeMutablePointer(to: &storage) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    recvfrom(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT), $0, &length)
                }
            }
            guard count >= 0 else { return }  // EAGAIN: none left (or an error the next poll sees again)
            let client = withUnsafePointer(to: &storage) { SocketAddress(copying: $0, length: length) }
            guard let flowFD = flow(for: client, balancer) else { continue }
            flows[client]?.lastSeen = .now
            if send(flowFD, buffer, count, Int32(MSG_DONTWAIT)) >= 0 { forwarded += 1 }
        }
    }

    /// The relay's answers on one flow, back to its client from the virtual address.
    private func fromRelay(_ flowFD: Int32, _ balancer: ReadinessBalancer, _ buffer: inout [UInt8]) {
        guard let client = clients[flowFD] else { return }
        var forwarded = 0
        defer { balancer.count(datagramsOut: forwarded) }
        for _ in 0..<256 {
            let count = recv(flowFD, &buffer, buffer.count, Int32(MSG_DONTWAIT))
            if count < 0 && errno == ECONNREFUSED { continue }  // the relay was down a moment: the flow stays
            guard count >= 0 else { return }
            flows[client]?.lastSeen = .now
            let sent = client.withSockAddr { address, length in
                sendto(fd, buffer, count, Int32(MSG_DONTWAIT), address, length)
            }
            if sent >= 0 { forwarded += 1 }
        }
    }

    /// The flow's socket, opened towards the chosen relay for a new client; nil when no relay is ready.
    private func flow(for client: SocketAddress, _ balancer: ReadinessBalancer) -> Int32? {
        if let flow = flows[client] { return flow.fd }
        guard let index = balancer.choose(tcp: false, client: client) else { return nil }
        let relay = balancer.backends[index].udp
        let flowFD = socket(
            relay.family, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard flowFD >= 0 else { return nil }
        guard relay.withSockAddr({ connect(flowFD, $0, $1) }) == 0 else {
            Glibc.close(flowFD)
            return nil
        }
        flows[client] = Flow(fd: flowFD, lastSeen: .now)
        clients[flowFD] = client
        return flowFD
    }

    private func forgetIdleFlows() {
        let now = ContinuousClock.now
        for (client, flow) in flows where now - flow.lastSeen > Self.idleLimit {
            Glibc.close(flow.fd)
            flows[client] = nil
            clients[flow.fd] = nil
        }
    }

    static func localAddress(of fd: Int32) throws(TransportError) -> SocketAddress {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = try systemCall("getsockname") {
            withUnsafeMutablePointer(to: &storage) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
            }
        }
        return withUnsafePointer(to: &storage) { SocketAddress(copying: $0, length: length) }
    }
}
