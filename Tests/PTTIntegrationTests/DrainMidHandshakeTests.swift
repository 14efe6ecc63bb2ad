import ChildProcesses
import Foundation
import Glibc
import TestSupport
import Testing
import TransportCore
import TransportIO

@testable import PTTTransport

/// A drain asks each connection once: one whose handshake was still open when the drain began is asked when its
/// handshake completes (the server's drivers remember the drain's deadline), not by asking every connection again.
@Suite(.serialized, .integration) struct DrainMidHandshakeTests {
    /// Whether `events` hold a move notice, with the time left (at most the drain's 5 s), on a server stream.
    /// The drains' deadline: generous, since the client's steps may be starved on a loaded machine, and a drain
    /// ends as soon as its last client left.
    static let drainDeadline = Duration.seconds(30)

    static func heardMoveNotice(_ events: [QUICEvent]) -> Bool {
        events.contains { event in
            guard case .streamData(let id, let bytes, true, _) = event, id & 0x3 == 0x3 else { return false }
            guard case .move(let closingIn)? = RelayNotice(decoding: bytes) else { return false }
            return closingIn > 0 && closingIn <= UInt64(drainDeadline.components.seconds) * 1000
        }
    }

    /// Over QUIC the relay's ngtcp2 may open the notice stream at 0.5-RTT already (it has the client's parameters
    /// from the ClientHello); either way the client that was mid-handshake hears the notice.
    @Test func aClientStillInItsHandshakeWhenTheDrainBeganIsAskedToMove() async throws {
        let relay = try await RecordingRelay.start(deliverEarlyDatagrams: false)
        defer { relay.stop() }
        let talker = try SteppedTalker(
            port: relay.port, resumption: try await relay.savedState(), frame: [1], acceptsRelayNotices: true)
        #expect(await relay.log.waitFor { $0.connections == 2 }, "handed out at 0.5-RTT, its handshake still open")
        let drain = Task { await relay.server.drain(deadline: Self.drainDeadline) }
        try await Task.sleep(for: .milliseconds(200))
        #expect(await onThread { talker.finishHandshake() })
        let heard = await onThread {
            talker.readUntil(Self.heardMoveNotice)
        }
        #expect(heard, "a move notice with the time left on a server stream: \(talker.events)")
        await onThread { talker.close() }
        await drain.value  // the relay is done once its last client left
        #expect(await relay.server.connectionCount() == 0)
    }
}

extension DrainMidHandshakeTests {
    /// Over TCP the relay cannot open the notice stream before the client's QMux parameters arrive (after its TLS
    /// Finished): a client that sent only its ClientHello when the drain began is asked once it is ready.
    @Test func aTCPClientThatSentOnlyItsClientHelloIsAskedOnceReady() async throws {
        let (server, address, relay, _) = try await Fixtures.tcpEchoServer()
        defer { relay.cancel() }
        let client = try SteppedQMuxClient(port: address.port)
        // The relay accepted the connection before the drain stops accepting: on a loaded machine a fixed 200 ms
        // could leave it in the listen backlog, never accepted, and so never asked to move.
        let accepted = ContinuousClock.now + .seconds(20)
        while await server.connectionCount() == 0, ContinuousClock.now < accepted {
            try await Task.sleep(for: .milliseconds(5))
        }
        try #require(await server.connectionCount() == 1, "the relay accepted the client's connection")
        try await Task.sleep(for: .milliseconds(200))  // the relay read the ClientHello and answered
        let drain = Task { await server.drain(deadline: Self.drainDeadline) }
        try await Task.sleep(for: .milliseconds(200))
        let heard = await onThread {
            client.readUntil(Self.heardMoveNotice)
        }
        #expect(heard, "a move notice with the time left on a server stream: \(client.events)")
        #expect(client.events.contains { if case .handshakeCompleted = $0 { true } else { false } })
        client.close()
        await drain.value  // the relay is done once its last client left
        #expect(await server.connectionCount() == 0)
    }
}

/// A QMux-over-TLS client (the library's sans-IO core over a plain TCP socket) stepped by hand: it sends its
/// ClientHello when made and goes on only when asked.
final class SteppedQMuxClient: @unchecked Sendable {
    // @unchecked Sendable invariant: one step runs at a time (the test awaits each before the next).
    let fd: Int32
    let core: QMuxOverTLS
    /// Every event the core emitted, in order.
    private(set) var events: [QUICEvent] = []

    init(port: UInt16) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var target = SilentTCP.address("127.0.0.1", port: port)
        let connected = withUnsafePointer(to: &target) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard fd >= 0, connected == 0 else {
            if fd >= 0 { Glibc.close(fd) }
            throw TransportError(.systemCallFailed, "cannot connect to 127.0.0.1:\(port)")
        }
        self.fd = fd
        var parameters = QUICParameters()
        parameters.acceptsRelayNotices = true
        core = try QMuxOverTLS(
            client: TLSClientContext(trust: PEMFile.trust(caFile: Fixtures.ca)), serverName: "localhost",
            parameters: parameters, ticket: nil, now: MonotonicClock.now())
        sendAll()
    }

    /// Blocking: goes on reading and answering until `done` holds for the events so far (false after 30 s).
    func readUntil(_ done: ([QUICEvent]) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(30)
        var buffer = [UInt8](repeating: 0, count: 16384)
        while Date() < deadline {
            while let event = core.nextEvent() { events.append(event) }
            if done(events) { return true }
            sendAll()
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, 20) > 0 else { continue }
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { return false }
            buffer.withUnsafeBytes {
                core.receive(UnsafeRawBufferPointer(rebasing: $0[..<count]), now: MonotonicClock.now())
            }
        }
        return false
    }

    /// Writes what the core has to send.
    private func sendAll() {
        let bytes = core.takeCiphertext(now: MonotonicClock.now())
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + written, bytes.count - written, 0) }
            guard count > 0 else { return }
            written += count
        }
    }

    func close() { Glibc.close(fd) }
}
