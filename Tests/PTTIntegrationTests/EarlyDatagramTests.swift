import BenchSupport
import ChildProcesses
import Foundation
import Glibc
import PTTTalkGroups
import TestSupport
import Testing
import TransportCore
import TransportIO

@testable import PTTTransport

/// A woken talker's first audio frames in 0-RTT, against a relay that delivers early datagrams at once or holds
/// them. The talker is stepped by hand so the test decides when its handshake may finish.
@Suite("Early audio at 0.5-RTT", .serialized, .integration)
struct EarlyDatagramTests {
    static let frame = [UInt8](repeating: 0x5a, count: 80)

    @Test func earlyDatagramsReachTheRelayBeforeTheHandshakeCompletes() async throws {
        let relay = try await RecordingRelay.start(deliverEarlyDatagrams: true)
        defer { relay.stop() }
        let talker = try SteppedTalker(port: relay.port, resumption: try await relay.savedState(), frame: Self.frame)
        // The talker sent only its first flight: the relay cannot complete the handshake without its Finished.
        #expect(await relay.log.waitFor { $0.datagrams.count == 1 }, "\(relay.log.snapshot)")
        let early = try #require(relay.log.snapshot.datagrams.first)
        #expect(early.isEarly)
        #expect(!early.relayReady, "delivered while the relay's side of the handshake was still open")
        #expect(early.payload == Self.frame)

        #expect(await onThread { talker.finishHandshake() })
        // The first of the two ready connections is the one that got the ticket.
        #expect(await relay.log.waitFor { $0.readyConnections == 2 }, "the handshake completed after the delivery")
        #expect(relay.log.snapshot.datagrams.count == 1)
    }

    @Test func earlyDatagramsAreHeldByDefault() async throws {
        let relay = try await RecordingRelay.start(deliverEarlyDatagrams: false)
        defer { relay.stop() }
        let talker = try SteppedTalker(port: relay.port, resumption: try await relay.savedState(), frame: Self.frame)
        #expect(await relay.log.waitFor { $0.connections == 2 }, "the connection is handed out at 0.5-RTT")
        #expect(!(await relay.log.waitFor(.milliseconds(300)) { !$0.datagrams.isEmpty }), "held: nothing yet")

        #expect(await onThread { talker.finishHandshake() })
        #expect(await relay.log.waitFor { $0.datagrams.count == 1 })
        let held = try #require(relay.log.snapshot.datagrams.first)
        #expect(held.isEarly, "still flagged as 0-RTT when released")
        #expect(held.payload == Self.frame)
    }

    @Test func aReplayedFirstFlightDeliversNothing() async throws {
        let relay = try await RecordingRelay.start(deliverEarlyDatagrams: true)
        defer { relay.stop() }
        let talker = try SteppedTalker(port: relay.port, resumption: try await relay.savedState(), frame: Self.frame)
        #expect(await relay.log.waitFor { $0.datagrams.count == 1 })
        #expect(await onThread { talker.finishHandshake() })
        #expect(await relay.log.waitFor { $0.readyConnections == 2 }, "\(relay.log.snapshot)")

        // While the original lives, a replay from a new socket reaches the original connection (its connection
        // IDs): duplicates, nothing delivered.
        try talker.replayFirstFlight()
        // Once the original closed and the relay forgot it, a replay is a new connection: the anti-replay store
        // refuses its early data, so its 0-RTT packets are never decrypted.
        await onThread { talker.close() }
        #expect(await relay.log.waitFor { $0.closedConnections == 2 })
        // Replayed until the relay forgot the original (its closing period, 3 PTO, is longer in a sanitized build):
        // until then the replays reach the draining connection and are dropped.
        var reached = false
        for _ in 0..<50 where !reached {
            for _ in 0..<5 { try talker.replayFirstFlight() }
            reached = await relay.log.waitFor(.milliseconds(100)) { $0.connections > 2 }
        }
        #expect(reached, "the replay reached the relay as a new connection")
        #expect(!(await relay.log.waitFor(.milliseconds(500)) { $0.datagrams.count > 1 }), "\(relay.log.snapshot)")
        #expect(relay.log.snapshot.datagrams.count == 1, "the early frame was delivered exactly once")
    }

    @Test func connectSendsEarlyDatagramsInZeroRTTWhenResumedAndAfterTheHandshakeWhenCold() async throws {
        var configuration = Fixtures.serverConfiguration()
        configuration.earlyData = .enabled(deliverEarlyDatagrams: true)
        let server = try await TransportServer.bind(configuration: configuration)
        let seen = PolledLog([Bool]())
        let relay = Task {
            await EchoRelay.run(server) { event in
                if case .datagram(_, _, let isEarly) = event { seen.update { $0.append(isEarly) } }
            }
        }
        defer { relay.cancel() }
        let address = server.quicAddress!
        let client = Fixtures.client()
        for resume in [false, true] {
            let saved = resume ? try await waitForResumptionState(try await client.connect(to: address)) : nil
            let connection = try await client.connect(to: address, resuming: saved, earlyDatagrams: [Self.frame])
            let echo = try await withTimeout(.seconds(20)) { () -> Datagram? in
                for await datagram in connection.datagrams { return datagram }
                return nil
            }
            #expect(echo?.payload == Self.frame)
            #expect(connection.resumption == (resume ? .resumed(earlyData: .accepted) : .none))
            await connection.close()
        }
        #expect(seen.snapshot == [false, true], "cold: sent after the handshake; resumed: in 0-RTT")
        await server.shutdown()
    }

    /// Over TCP the woken talker's first frames go once the connection is ready, cold or resumed (the one driver
    /// of both transports keeps them; before it, the TCP path dropped them unsent). One the relay cannot take (too
    /// large) is counted as rejected, and the others still go.
    @Test func connectOverTCPSendsEarlyDatagramsOnceReady() async throws {
        let (server, address, relay, client) = try await Fixtures.tcpEchoServer()
        defer { relay.cancel() }
        let tooLarge = [UInt8](repeating: 1, count: 70_000)
        for resume in [false, true] {
            let saved = resume ? try await waitForResumptionState(try await client.connect(to: address)) : nil
            let connection = try await client.connect(
                to: address, resuming: saved, earlyDatagrams: [Self.frame, tooLarge, [7]])
            #expect(connection.path == .tcp)
            let echoes = try await withTimeout(.seconds(20)) { () -> [[UInt8]] in
                var echoes: [[UInt8]] = []
                for await datagram in connection.datagrams {
                    echoes.append(datagram.payload)
                    if echoes.count == 2 { break }
                }
                return echoes
            }
            #expect(echoes == [Self.frame, [7]], "resumed: \(resume)")
            #expect(await connection.statistics().datagramsRejected == 1)
            await connection.close()
        }
        await server.shutdown()
    }
}

/// What a `RecordingRelay` saw.
struct RelaySightings: Sendable, CustomStringConvertible {
    struct Sighting: Sendable {
        var payload: [UInt8]
        var isEarly: Bool
        /// Whether the relay's connection reported its handshake completed when the frame was delivered.
        var relayReady: Bool
    }
    var connections = 0
    var readyConnections = 0
    var closedConnections = 0
    var datagrams: [Sighting] = []

    var description: String {
        "\(connections) connections, \(readyConnections) ready, \(closedConnections) closed, "
            + "datagrams (early, ready): \(datagrams.map { ($0.isEarly, $0.relayReady) })"
    }
}

/// A relay that records every connection and datagram, with early hand-out on (and early datagrams as asked).
final class RecordingRelay: Sendable {
    let server: TransportServer
    let port: UInt16
    let log = PolledLog(RelaySightings())
    private let task: Task<Void, Never>

    private init(server: TransportServer) {
        self.server = server
        port = server.quicAddress!.port
        let log = self.log
        task = Task {
            await withDiscardingTaskGroup { group in
                for await connection in server.connections {
                    log.update { $0.connections += 1 }
                    group.addTask {
                        await connection.setDatagramHandler { datagram in
                            let ready = connection.status == .ready
                            log.update {
                                $0.datagrams.append(
                                    .init(payload: datagram.payload, isEarly: datagram.isEarly, relayReady: ready))
                            }
                        }
                        for await status in connection.statusUpdates {
                            if status == .ready { log.update { $0.readyConnections += 1 } }
                            if case .closed = status { log.update { $0.closedConnections += 1 } }
                        }
                    }
                }
            }
        }
    }

    static func start(deliverEarlyDatagrams: Bool) async throws -> RecordingRelay {
        var configuration = Fixtures.serverConfiguration()
        configuration.earlyData = .enabled(deliverBeforeHandshake: true, deliverEarlyDatagrams: deliverEarlyDatagrams)
        return RecordingRelay(server: try await TransportServer.bind(configuration: configuration))
    }

    /// A first (1-RTT) connection's resumption state in the core's terms; counts as one connection.
    func savedState() async throws -> ClientResumption {
        let connection = try await Fixtures.client().connect(to: ServerAddress(host: "127.0.0.1", port: port))
        let state = try await waitForResumptionState(connection)
        // The relay counts `.ready` from each connection's status updates, which start with the status current when
        // its task subscribes: closing first could let a slow relay task see only `.closed`.
        #expect(await log.waitFor { $0.readyConnections == 1 }, "\(log.snapshot)")
        await connection.close()
        return try #require(state.quicResumption)
    }

    func stop() {
        task.cancel()
        let server = self.server
        Task { await server.shutdown() }
    }
}

/// A value updated from any thread, and waited on by polling.
final class PolledLog<Value: Sendable>: Sendable {
    private let value: Locked<Value>
    init(_ initial: Value) { value = Locked(initial) }

    func update(_ change: (inout Value) -> Void) { value.withLock { change(&$0) } }
    var snapshot: Value { value.withLock { $0 } }

    /// Whether `condition` held within `limit`.
    func waitFor(_ limit: Duration = .seconds(20), _ condition: (Value) -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if condition(snapshot) { return true }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return condition(snapshot)
    }
}

/// A resumed QUIC client (the library's sans-IO connection over a plain UDP socket) that sends one audio frame in
/// 0-RTT with its first flight and then waits for the test: it finishes the handshake only when asked, and can
/// replay its captured first flight from new sockets, as an attacker on the path would.
final class SteppedTalker: @unchecked Sendable {
    // @unchecked Sendable invariant: one step runs at a time (each test awaits a step before starting the next).
    let fd: Int32
    let local: SocketAddress
    let remote: SocketAddress
    let core: QUICConnection
    private(set) var firstFlight: [[UInt8]] = []
    /// Events other than the handshake's completion, in order, as `finishHandshake` and `readUntil` met them.
    private(set) var events: [QUICEvent] = []

    /// A talker whose first flight carries `frame` as a 0-RTT datagram (nil: none) and `messages` (each framed as a
    /// transport message) on its first stream, in 0-RTT.
    init(
        port: UInt16, resumption: ClientResumption, frame: [UInt8]?, messages: [[UInt8]] = [],
        acceptsRelayNotices: Bool = false
    ) throws {
        (fd, local, remote, core) = try BoundQUICClient.connection(toPort: port, resumption: resumption) {
            $0.acceptsRelayNotices = acceptsRelayNotices
        }
        #expect(core.earlyDataAttempted)
        if let frame { try core.sendDatagram(frame) }
        if !messages.isEmpty, let stream = try core.openBidirectionalStream() {
            try core.write(stream: stream, messages.flatMap { MessageFraming.frame($0) }, fin: false)
        }
        firstFlight = writeAll()
    }

    deinit { Glibc.close(fd) }

    /// Writes and sends every packet the core has now, and returns them.
    @discardableResult
    private func writeAll() -> [[UInt8]] {
        let packets = BoundQUICClient.written(by: core)
        for packet in packets { BoundQUICClient.send(fd, packet, to: remote) }
        return packets
    }

    /// Blocking: reads the relay's flight and answers until the handshake completed (false after 30 s).
    func finishHandshake() -> Bool {
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            while let event = core.nextEvent() {
                if case .handshakeCompleted = event {
                    writeAll()
                    return true
                }
                events.append(event)
            }
            step()
        }
        return false
    }

    /// Blocking: goes on reading and answering until `done` holds for the events met so far (false after 30 s).
    func readUntil(_ done: ([QUICEvent]) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            while let event = core.nextEvent() { events.append(event) }
            if done(events) { return true }
            step()
        }
        return false
    }

    /// Sends what the core has, reads one packet (20 ms at most), runs a due timer.
    private func step() {
        writeAll()
        if let packet = BoundQUICClient.receive(fd, milliseconds: 20) {
            packet.withUnsafeBytes { core.receive(packet: $0, from: remote, to: local, now: MonotonicClock.now()) }
        }
        if let due = core.nextTimeout, due <= MonotonicClock.now() { core.handleTimeout(now: MonotonicClock.now()) }
    }

    /// Blocking: closes the connection (CONNECTION_CLOSE to the relay).
    func close() {
        core.close(code: 0, reason: "", now: MonotonicClock.now())
        writeAll()
    }

    /// Sends the captured first flight again from a new socket (a new source port).
    func replayFirstFlight() throws {
        guard let (attacker, _) = BoundQUICClient.socket(boundTo: "127.0.0.1") else {
            throw TransportError(.systemCallFailed, "cannot bind a UDP socket on 127.0.0.1")
        }
        defer { Glibc.close(attacker) }
        for packet in firstFlight { BoundQUICClient.send(attacker, packet, to: remote) }
    }
}
