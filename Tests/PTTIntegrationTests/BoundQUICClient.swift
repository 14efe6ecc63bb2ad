import Foundation
import Glibc
import PTTTransport
import TransportCore
import TransportIO

/// A QUIC client sending from a chosen local address (`TransportClient` lets the kernel pick the source, always
/// 127.0.0.1 on loopback): the library's sans-IO connection driven over a plain UDP socket bound to, e.g.,
/// 127.0.0.2. Used by the admission-control tests, which need clients from several source addresses.
enum BoundQUICClient {
    /// A UDP socket bound to `host` (port 0), or nil when the bind fails.
    static func socket(boundTo host: String) -> (fd: Int32, address: SocketAddress)? {
        let fd = Glibc.socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        inet_pton(AF_INET, host, &local.sin_addr)
        let bound = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) == 0 }
        }
        guard bound, named else {
            close(fd)
            return nil
        }
        return (fd, SocketAddress(copying: &storage, length: length))
    }

    /// A client connection to 127.0.0.1:`port` from a fresh socket bound to 127.0.0.1, trusting the test CA and
    /// negotiating versions as the library's client does; `adjust` sets the rest of its parameters.
    static func connection(
        toPort port: UInt16, resumption: ClientResumption? = nil, adjust: (inout QUICParameters) -> Void = { _ in }
    ) throws -> (fd: Int32, local: SocketAddress, remote: SocketAddress, core: QUICConnection) {
        guard let (fd, local) = socket(boundTo: "127.0.0.1") else {
            throw TransportError(.systemCallFailed, "cannot bind a UDP socket on 127.0.0.1")
        }
        let remote = SocketAddress(host: "127.0.0.1", port: port)!
        var parameters = QUICParameters()
        parameters.negotiatesVersion = true  // as the library's client: starts in the ticket's version (v2 on 1.x)
        adjust(&parameters)
        do {
            let core = try QUICConnection(
                clientWith: parameters, tls: TLSClientContext(trust: PEMFile.trust(caFile: Fixtures.ca)),
                serverName: "localhost", local: local, remote: remote, now: MonotonicClock.now(),
                resumption: resumption)
            return (fd, local, remote, core)
        } catch {
            close(fd)
            throw error
        }
    }

    /// Every datagram `core` has to send now, in order.
    static func written(by core: QUICConnection) -> [[UInt8]] {
        var datagrams: [[UInt8]] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        buffer.withUnsafeMutableBytes { raw in
            core.drainPackets(into: raw, now: MonotonicClock.now()) { datagrams.append(Array($0)) }
        }
        return datagrams
    }

    static func send(_ fd: Int32, _ bytes: [UInt8], to remote: SocketAddress) {
        _ = remote.withSockAddr { addr, length in sendto(fd, bytes, bytes.count, 0, addr, length) }
    }

    /// Waits up to `milliseconds` for a datagram on `fd`.
    static func receive(_ fd: Int32, milliseconds: Int32) -> [UInt8]? {
        var poll = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard Glibc.poll(&poll, 1, milliseconds) > 0 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 65536)
        let n = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
        return n >= 0 ? Array(buffer.prefix(n)) : nil
    }

    /// A fresh client connection's first datagram (its Initial, padded to 1200 bytes): a valid Initial a test
    /// can send from any source address.
    static func initialDatagram(to server: SocketAddress, ca: String = Fixtures.ca) throws -> [UInt8] {
        let local = SocketAddress(host: "127.0.0.1", port: 9)!
        let core = try QUICConnection(
            clientWith: QUICParameters(), tls: TLSClientContext(trust: PEMFile.trust(caFile: ca)),
            serverName: "localhost", local: local, remote: server,
            now: MonotonicClock.now())
        var buffer = [UInt8](repeating: 0, count: 65536)
        let length = buffer.withUnsafeMutableBytes { core.writePacket(into: $0, now: MonotonicClock.now()).length }
        return Array(buffer.prefix(length))
    }

    /// Connects from `host` to the relay on 127.0.0.1:`port`, echoes `message` on one stream and returns what came
    /// back, or the error the connection ended with. Runs on a thread of its own (it blocks in poll).
    static func echo(
        from host: String, port: UInt16, message: [UInt8], ca: String = Fixtures.ca,
        timeout: TimeInterval = 10
    ) async -> Result<[UInt8], TransportError> {
        await withCheckedContinuation { continuation in
            Thread {
                continuation.resume(
                    returning: echoBlocking(
                        from: host, port: port, message: message, ca: ca,
                        timeout: timeout))
            }.start()
        }
    }

    private static func echoBlocking(
        from host: String, port: UInt16, message: [UInt8], ca: String,
        timeout: TimeInterval
    ) -> Result<[UInt8], TransportError> {
        precondition(!message.isEmpty && message.count < 64, "one-byte varint framing")
        guard let (fd, local) = socket(boundTo: host) else {
            return .failure(TransportError(.systemCallFailed, "cannot bind \(host)"))
        }
        defer { close(fd) }
        let remote = SocketAddress(host: "127.0.0.1", port: port)!
        let core: QUICConnection
        do {
            core = try QUICConnection(
                clientWith: QUICParameters(), tls: TLSClientContext(trust: PEMFile.trust(caFile: ca)),
                serverName: "localhost", local: local, remote: remote,
                now: MonotonicClock.now())
        } catch {
            return .failure(error)
        }
        var buffer = [UInt8](repeating: 0, count: 65536)
        var echoed: [UInt8] = []
        var stream: Int64?
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            buffer.withUnsafeMutableBytes { raw in
                if let close = core.takeClosePacket() { send(fd, close.bytes, to: remote) }
                while true {
                    let length = core.writePacket(into: raw, now: MonotonicClock.now()).length
                    if length == 0 { break }
                    send(fd, Array(raw.prefix(length)), to: remote)
                }
                core.finishWriteBurst(now: MonotonicClock.now())
            }
            while let event = core.nextEvent() {
                switch event {
                case .handshakeCompleted:
                    do {
                        stream = try core.openBidirectionalStream()
                        if let stream { try core.write(stream: stream, [UInt8(message.count)] + message, fin: true) }
                    } catch {
                        return .failure(error)
                    }
                case .streamData(let id, let bytes, _, _) where id == stream:
                    echoed += bytes
                    if echoed.count >= message.count + 1 { return .success(Array(echoed.dropFirst())) }
                case .closed(let reason):
                    return .failure(reason.error)
                default:
                    break
                }
            }
            let now = MonotonicClock.now()
            let wait = core.nextTimeout.map { $0 > now ? Int32(min(($0 - now) / 1_000_000 + 1, 50)) : 0 } ?? 50
            if let datagram = receive(fd, milliseconds: wait) {
                datagram.withUnsafeBytes {
                    core.receive(packet: $0, from: remote, to: local, now: MonotonicClock.now())
                }
            }
            if let due = core.nextTimeout, due <= MonotonicClock.now() { core.handleTimeout(now: MonotonicClock.now()) }
        }
        return .failure(TransportError(.handshakeTimeout, "no echo from \(host) within \(timeout) s"))
    }
}
