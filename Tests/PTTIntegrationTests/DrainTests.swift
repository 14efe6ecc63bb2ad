import ChildProcesses
import Foundation
import PTTTransport
import TestSupport
import Testing

/// A rolling restart: a draining relay takes no new connections and asks its clients to move; a link moves to
/// another relay of the name before the old connection closes (no `.reconnecting`, audio keeps flowing), and the
/// relay is done as soon as its clients left. Relays on 127.0.0.2 and 127.0.0.3 stand for two hosts of one name.
@Suite(.serialized, .integration) struct DrainTests {
    @Test(arguments: [FallbackPolicy.quicOnly, .tcpOnly])
    func aLinkMovesToAnotherRelayBeforeTheDrainingOneCloses(policy: FallbackPolicy) async throws {
        let key = try ServerIdentityTests.keyFile()
        defer { key.cleanup() }
        let (servers, port) = try await ServerIdentityTests.fleet(["127.0.0.2", "127.0.0.3"], keyFile: key.path)
        var configuration = ServerIdentityTests.client(
            policy, name: "localhost", port: port, addresses: ["127.0.0.2", "127.0.0.3"]
        ).configuration
        // Long enough that a loaded machine's slow first handshake with 127.0.0.2 does not start 127.0.0.3 beside it.
        configuration.addressAttemptDelay = .seconds(1)
        let link = TransportLink(
            client: TransportClient(configuration: configuration), to: ServerAddress(host: "localhost", port: port),
            rejoin: [EarlyMessage(Array("join 7".utf8), replaySafe: true)])
        defer { link.stop() }
        let log = StatusLog(link)
        let first = try await withTimeout { try await link.nextReady() }
        #expect(first.remoteAddress.hasPrefix("127.0.0.2"))
        _ = try await withTimeout { try await link.resumptionStateSoon() }

        // Audio both ways through whichever connection the link holds, every 20 ms.
        let audio = AudioProbe(link)
        try await Task.sleep(for: .milliseconds(300))
        let clock = ContinuousClock()
        let drainStart = clock.now
        // A deadline of 20 s: a loaded machine's move may take seconds, and one cut short by the deadline would be a
        // reconnect; done well before it (15 s) still shows the relay did not wait for it.
        await servers[0].drain(deadline: .seconds(20))
        let drained = clock.now - drainStart
        let echoedAtTheMove = await audio.echoes
        try await Task.sleep(for: .milliseconds(500))
        let (sent, echoed) = await audio.stop()

        let now = try #require(link.connection)
        #expect(now.remoteAddress.hasPrefix("127.0.0.3"), "the link moved to the other relay")
        #expect(now.status == .ready)
        #expect(now.resumption != .none, "it resumed the session the first relay issued")
        #expect(drained < .seconds(15), "the relay was done when its client left, not at the deadline (\(drained))")
        #expect(echoed > echoedAtTheMove, "audio flows on the new connection (\(echoed) of \(sent) echoed)")
        let shapes = await log.statuses().map(\.shape)
        #expect(shapes == ["connecting", "ready"], "the app saw no reconnect: \(shapes)")
        await servers[1].shutdown()
    }

    /// `serve` drains on SIGTERM: a new client is refused at once, a connected one is asked to move (told how long
    /// it has), and the relay exits 0 as soon as it left.
    @Test(arguments: [FallbackPolicy.quicOnly, .tcpOnly])
    func serveDrainsOnSIGTERM(policy: FallbackPolicy) async throws {
        let relay = try await startChildRelay(events: false, ["--drain-seconds", "20"])
        defer { relay.kill() }
        let address = try #require(ServerAddress(relay.address))
        let client = TCPFallbackTests.client(policy)
        let connection = try await client.connect(to: address)
        kill(relay.processIdentifier, SIGTERM)
        let notice = try await withTimeout(.seconds(10)) { try await connection.relayDraining() }
        #expect(notice.map { $0 > .seconds(15) && $0 <= .seconds(20) } == true, "\(String(describing: notice))")
        await #expect(throws: TransportError.self) { _ = try await client.connect(to: address) }
        let clock = ContinuousClock()
        let left = clock.now
        await connection.close(code: 0, reason: "moving on")
        while relay.isRunning && clock.now - left < .seconds(15) { try await Task.sleep(for: .milliseconds(20)) }
        // Long before the drain's 20 s deadline (5 s left a loaded machine too little): it did not wait for it.
        #expect(!relay.isRunning && clock.now - left < .seconds(12), "the relay exited when its last client left")
        #expect(relay.terminationStatus == 0)
    }
}

/// Sends a frame every 20 ms on the link's current connection and counts the echoes, across connections.
actor AudioProbe {
    private var sent = 0
    private var echoed = 0
    private var tasks: [Task<Void, Never>] = []

    init(_ link: TransportLink) {
        let sender = Task { [weak self] in
            var readers: [ObjectIdentifier: Task<Void, Never>] = [:]
            while !Task.isCancelled, let self {
                if let connection = link.connection, connection.status == .ready {
                    if readers[ObjectIdentifier(connection)] == nil {
                        readers[ObjectIdentifier(connection)] = Task {
                            for await _ in connection.datagrams { await self.echo() }
                        }
                    }
                    if (try? connection.sendDatagram([1, 2, 3])) != nil { await self.send() }
                }
                try? await Task.sleep(for: .milliseconds(20))
            }
            for reader in readers.values { reader.cancel() }
        }
        Task { await self.keep(sender) }
    }

    /// The echoes received so far.
    var echoes: Int { echoed }

    private func keep(_ task: Task<Void, Never>) { tasks.append(task) }
    private func send() { sent += 1 }
    private func echo() { echoed += 1 }

    /// Stops sending and returns the frames sent and echoed.
    func stop() async -> (sent: Int, echoed: Int) {
        for task in tasks { task.cancel() }
        try? await Task.sleep(for: .milliseconds(100))
        return (sent, echoed)
    }
}

extension TransportLink {
    /// Waits (bounded) until the link holds resumption state.
    func resumptionStateSoon() async throws -> ResumptionState {
        for _ in 0..<500 {
            if let state = resumptionState { return state }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw TransportError(.internalError, "no resumption state within 5 s")
    }
}
