import Foundation
import Glibc
import PTTTalkGroups
import PTTTransport
import TestSupport
import Testing
import TransportCore
import TransportIO

/// TCP clients that complete QMux over TLS, advertise plenty of credit, and never read: the relay must neither
/// buffer for them without bound (its writers wait instead) nor keep a closed connection's socket forever.
@Suite("TCP peers that never read: bounded buffering, closed connections released", .integration)
struct TCPNonReadingPeerTests {
    @Test func aClosedConnectionWhosePeerNeverReadsIsReleased() async throws {
        var configuration = Fixtures.serverConfiguration()
        configuration.quic = nil
        configuration.tcp = "127.0.0.1:0"
        // Room for a slow (sanitized, loaded) handshake and the steps below before it fires: 3 s was not (beside
        // two CPU hogs the connection had already timed out when the test task first looked).
        configuration.idleTimeout = .seconds(10)
        let server = try await TransportServer.bind(configuration: configuration)
        let relay = Task { await EchoRelay.run(server) }
        defer { relay.cancel() }
        let port = server.tcpAddress!.port

        let client = try await Self.onThread { try NonReadingClient(port: port) }
        #expect(await server.connectionCount() == 1)
        try await Self.onThread { try client.sendWithoutReading(streams: 3) }
        for _ in 0..<500 where client.unreadBytes == 0 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(client.unreadBytes > 0, "the relay echoed into our unread receive buffer")

        // The relay's echo backs up behind our unread receive buffer; it closes at the idle timeout and must then
        // release the connection within its close linger (2 s). Generous bound: 40 s.
        var count = await server.connectionCount()
        let deadline = ContinuousClock.now + .seconds(40)
        while count > 0, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
            count = await server.connectionCount()
        }
        #expect(count == 0, "the relay still holds the connection of a peer that never reads")
        await server.shutdown()
        withExtendedLifetime(client) {}  // our socket stays open (and unread) until here
    }

    @Test func aRelayWritingToAPeerThatNeverReadsIsHeldBackInsteadOfBuffering() async throws {
        var configuration = Fixtures.serverConfiguration()
        configuration.quic = nil
        configuration.tcp = "127.0.0.1:0"
        let server = try await TransportServer.bind(configuration: configuration)
        let written = Locked(0)
        // The application pushes 32 KiB messages on a stream it opened, as fast as `send` returns.
        let application = Task {
            for await connection in server.connections {
                guard let stream = try? await connection.openStream() else { continue }
                let message = [UInt8](repeating: 0x62, count: 32 * 1024)
                while (try? await stream.send(message)) != nil {
                    written.withLock { $0 += message.count }
                }
            }
        }
        defer { application.cancel() }
        let port = server.tcpAddress!.port
        let client = try await Self.onThread { try NonReadingClient(port: port) }

        // Wait until the writer stops making progress (its sends are suspended) or it reached the 64 MiB of credit
        // we advertised, which only unbounded buffering would let it reach. Nothing written yet is no verdict: on a
        // loaded machine the handshake alone may take longer than one sample.
        var last = -1
        var now = written.withLock { $0 }
        for _ in 0..<40 where (now != last || now == 0) && now < NonReadingClient.credit {
            try await Task.sleep(for: .milliseconds(500))
            (last, now) = (now, written.withLock { $0 })
        }
        #expect(now < 16 << 20, "the relay accepted \(now >> 20) MiB for a peer that reads nothing")
        #expect(now > 0, "the application could write at first")
        await server.shutdown()
        withExtendedLifetime(client) {}  // our socket stays open (and unread) until here
    }

    static func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try body() }) }.start()
        }
    }
}

/// QMux over TLS driven by hand on a blocking socket with a small receive buffer: handshakes, then sends a
/// stream of messages and never reads again.
final class NonReadingClient: @unchecked Sendable {
    // @unchecked Sendable invariant: used by one thread at a time (each step runs on a thread of its own, awaited).
    let fd: Int32
    let core: QMuxOverTLS
    /// The connection and stream credit advertised to the relay.
    static let credit = 64 << 20

    init(port: UInt16) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        self.fd = fd
        var small: Int32 = 4096
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var target = SilentTCP.address("127.0.0.1", port: port)
        let connected = withUnsafePointer(to: &target) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else { throw TransportError(.unreachable, "connect failed: errno \(errno)") }
        let context = try TLSClientContext(trust: PEMFile.trust(caFile: Fixtures.ca))
        var parameters = QUICParameters()
        parameters.initialMaxData = UInt64(Self.credit)  // the relay's writes are held back by TCP alone
        parameters.initialMaxStreamData = UInt64(Self.credit)
        core = try QMuxOverTLS(
            client: context, serverName: "localhost", parameters: parameters, ticket: nil,
            now: MonotonicClock.now())
        var ready = false
        var buffer = [UInt8](repeating: 0, count: 16384)
        while !ready {
            try flush()
            let count = recv(fd, &buffer, buffer.count, 0)
            guard count > 0 else { throw TransportError(.connectionReset, "the relay ended the handshake") }
            buffer.withUnsafeBytes {
                core.receive(UnsafeRawBufferPointer(rebasing: $0[..<count]), now: MonotonicClock.now())
            }
            while let event = core.nextEvent() {
                if case .handshakeCompleted = event { ready = true }
                if case .closed(let reason) = event { throw reason.error }
            }
        }
        try flush()
    }

    deinit { close(fd) }

    /// Writes `streams` streams of 1 MiB in 32 KiB messages (within the relay's initial credit, as we never read
    /// its MAX_STREAM_DATA) and returns without reading.
    func sendWithoutReading(streams: Int) throws {
        let message = MessageFraming.frame([UInt8](repeating: 0x61, count: 32 * 1024 - 8))
        for _ in 0..<streams {
            guard let stream = try core.openBidirectionalStream() else {
                throw TransportError(.protocolViolation, "no stream credit")
            }
            for _ in 0..<32 { try core.write(stream: stream, message, fin: false) }
        }
        try flush()
    }

    /// Bytes the relay sent that are waiting in our receive buffer.
    var unreadBytes: Int {
        var count: Int32 = 0
        return ioctl(fd, UInt(FIONREAD), &count) == 0 ? Int(count) : 0
    }

    private func flush() throws {
        let bytes = core.takeCiphertext(now: MonotonicClock.now())
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes {
                send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL))
            }
            guard sent > 0 else { throw TransportError(.connectionReset, "send failed: errno \(errno)") }
            offset += sent
        }
    }
}
