import ChildProcesses
import Foundation
import PTTTalkGroups
import PTTTransport
import TestSupport
import Testing

@Suite("Fast wake end to end", .serialized, .integration)
struct FastWakeTests {
    @Test func stateWrittenByOneProcessResumesWithZeroRTTInAnother() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ptt-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let session = directory.appendingPathComponent("session.bin").path
        let server = try await ChildServer.start(
            Subprocess.cli,
            [
                "serve", "--listen", "127.0.0.1:0", "--cert", Fixtures.serverCert, "--key", Fixtures.serverKey,
                "--ticket-key", directory.appendingPathComponent("ticket.key").path, "--events",
            ])
        let connect = [
            "connect", server.address, "--ca", Fixtures.ca, "--session-file", session, "--json",
            "--datagrams", "20",
        ]

        let cold = try await runProgram(Subprocess.cli, connect)
        #expect(cold.status == 0, "\(cold.stderr)")
        #expect(jsonObject(cold.stdout)?["resumed"] as? Bool == false)
        #expect(FileManager.default.fileExists(atPath: session))

        let warm = try await runProgram(Subprocess.cli, connect)
        #expect(warm.status == 0, "\(warm.stderr)")
        let result = try #require(jsonObject(warm.stdout))
        #expect(result["resumed"] as? Bool == true)
        #expect(result["early_data"] as? String == "accepted")
        // The CLI's audio expires after 100 ms unsent, as audio should, and a loaded machine may starve the loop that
        // long: one echo proves datagrams flow in the call; all of them is a quiet machine's figure.
        #expect((1...20).contains(result["datagrams_echoed"] as? Int ?? 0), "\(result)")

        // A corrupted state is ignored with a diagnostic; the connection goes cold and works.
        try Data("corrupted".utf8).write(to: URL(fileURLWithPath: session))
        let corrupted = try await runProgram(Subprocess.cli, connect)
        #expect(corrupted.status == 0)
        #expect(corrupted.stderr.contains("resumption-state-unusable"))
        #expect(jsonObject(corrupted.stdout)?["resumed"] as? Bool == false)

        let (status, events) = await server.stop()
        #expect(status == 0, "serve exits 0 on SIGINT")
        #expect(events.contains("\"is_early\":true"))
    }

    @Test func foreignStateIsNeverOfferedToAnotherServer() async throws {
        let (serverA, addressA, relayA) = try await Fixtures.echoServer()
        let (serverB, addressB, relayB) = try await Fixtures.echoServer()
        defer {
            relayA.cancel()
            relayB.cancel()
        }
        let client = Fixtures.client()
        let first = try await client.connect(to: addressA, earlyMessages: [EarlyMessage([1], replaySafe: true)])
        let saved = try await waitForResumptionState(first)
        await first.close()

        let other = try await client.connect(to: addressB, resuming: saved)
        #expect(other.resumption == .none)
        #expect(other.resumptionDiagnostic?.contains("belongs to") == true)
        await other.close()
        await serverA.shutdown()
        await serverB.shutdown()
    }

    /// Over QUIC and over TCP (QMux with TLS early data): the same profile.
    @Test(arguments: [FallbackPolicy.quicOnly, .tcpOnly])
    func onlyTheReplaySafePrefixTravelsInZeroRTT(policy: FallbackPolicy) async throws {
        var configuration = Fixtures.serverConfiguration()
        configuration.tcp = "127.0.0.1:0"
        configuration.earlyData = .enabled(deliverBeforeHandshake: true)
        let server = try await TransportServer.bind(configuration: configuration)
        let address = server.quicAddress!
        let seen = EventLog()
        let relay = Task { await EchoRelay.run(server) { seen.append($0) } }
        defer { relay.cancel() }
        let client = TCPFallbackTests.client(policy)
        let first = try await client.connect(to: address, earlyMessages: [EarlyMessage([0], replaySafe: true)])
        var firstReplies = try #require(first.earlyStream).messages.makeAsyncIterator()
        _ = try await firstReplies.next()  // so the relay reports the first connection's message too
        let saved = try await waitForResumptionState(first)
        await first.close()

        let messages = [
            EarlyMessage(Array("read burst".utf8), replaySafe: true),
            EarlyMessage(Array("begin talk".utf8), replaySafe: false),
            EarlyMessage(Array("read speaker".utf8), replaySafe: true),
        ]
        let connection = try await client.connect(to: address, resuming: saved, earlyMessages: messages)
        #expect(connection.path == (policy == .tcpOnly ? .tcp : .quic))
        #expect(connection.resumption == .resumed(earlyData: .accepted))
        let stream = try #require(connection.earlyStream)
        var echoed: [[UInt8]] = []
        for try await message in stream.messages {
            echoed.append(message.bytes)
            if echoed.count == 3 { break }
        }
        #expect(echoed == messages.map(\.bytes))
        // The relay reports a message after echoing it: wait (bounded) for the reports.
        _ = await eventually(within: .seconds(20)) { seen.messageFlagsOfSecondConnection().count >= 3 }
        let flags = seen.messageFlagsOfSecondConnection()
        #expect(flags == [true, false, false], "only the replay-safe prefix was early; events: \(seen.all())")
        await connection.close()
        await server.shutdown()
    }

    /// A relay restarted with the same ticket key resumes TLS but refuses the early data (its anti-replay
    /// window starts afresh): the messages are re-sent after the handshake and arrive exactly once.
    @Test(arguments: [FallbackPolicy.quicOnly, .tcpOnly])
    func rejectedEarlyDataIsResentAndDeliveredOnce(policy: FallbackPolicy) async throws {
        let keyFile = FileManager.default.temporaryDirectory.appendingPathComponent("ptt-key-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: keyFile) }
        let client = TCPFallbackTests.client(policy)
        let (configuration, address, saved) = try await ticketFromARelayThatWentAway(keyFile: keyFile, client: client)
        let restarted = try await Fixtures.rebind(configuration)
        let seen = EventLog()
        let relay = Task { await EchoRelay.run(restarted) { seen.append($0) } }
        defer { relay.cancel() }
        let messages = [
            EarlyMessage(Array("read burst".utf8), replaySafe: true),
            EarlyMessage(Array("begin talk".utf8), replaySafe: false),
        ]
        let connection = try await client.connect(to: address, resuming: saved, earlyMessages: messages)
        #expect(connection.resumption == .resumed(earlyData: .rejected))
        let stream = try #require(connection.earlyStream)
        var echoed: [[UInt8]] = []
        for try await message in stream.messages {
            echoed.append(message.bytes)
            if echoed.count == 2 { break }
        }
        #expect(echoed == messages.map(\.bytes))
        _ = await eventually(within: .seconds(20)) { seen.messageFlags().count >= 2 }
        try await Task.sleep(for: .milliseconds(50))  // a duplicate would show up here
        #expect(seen.messageFlags() == [false, false], "each message arrived once, none flagged early")
        await connection.close()
        await restarted.shutdown()
    }

    /// Rotating the ticket key: with the old key as `previousTicketKeyFile` a restarted relay still resumes
    /// clients holding old tickets; once it is dropped they connect with a full handshake, never a failure.
    @Test(arguments: [FallbackPolicy.quicOnly, .tcpOnly])
    func ticketKeyRotationKeepsOldTicketsResumingDuringTheOverlap(policy: FallbackPolicy) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ptt-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let oldKey = directory.appendingPathComponent("old.key").path
        let newKey = directory.appendingPathComponent("new.key").path
        var configuration = Fixtures.serverConfiguration()
        configuration.tcp = "127.0.0.1:0"
        configuration.ticketKeyFile = oldKey
        let client = TCPFallbackTests.client(policy)

        func relay(
            _ configuration: ServerConfiguration, resuming saved: ResumptionState?,
            at address: ServerAddress?
        ) async throws -> (ResumptionStatus, ResumptionState?, ServerAddress) {
            var configuration = configuration
            if let address {
                configuration.quic = "127.0.0.1:\(address.port)"
                configuration.tcp = "127.0.0.1:\(address.port)"
            }
            let server =
                address == nil
                ? try await Fixtures.bindOnStablePort(configuration)
                : try await TransportServer.bind(configuration: configuration)
            let echo = Task { await EchoRelay.run(server) }
            defer { echo.cancel() }
            let bound = server.quicAddress!
            let connection = try await client.connect(to: bound, resuming: saved)
            let state = try? await waitForResumptionState(connection)
            await connection.close()
            await server.shutdown()
            return (connection.resumption, state, bound)
        }

        let (_, oldTicket, address) = try await relay(configuration, resuming: nil, at: nil)
        configuration.ticketKeyFile = newKey
        configuration.previousTicketKeyFile = oldKey
        #expect(oldTicket != nil, "the first relay issued a ticket")
        let (overlap, _, _) = try await relay(configuration, resuming: oldTicket, at: address)
        #expect(overlap != .none, "the old key's ticket resumed during the overlap")
        configuration.previousTicketKeyFile = nil
        let (after, _, _) = try await relay(configuration, resuming: oldTicket, at: address)
        #expect(after == .none, "without the old key: a full handshake")
    }

    @Test func earlyMessagesOnAColdConnectionGoAfterTheHandshake() async throws {
        let (server, address, relay) = try await Fixtures.echoServer()
        defer { relay.cancel() }
        let connection = try await Fixtures.client().connect(
            to: address, earlyMessages: [EarlyMessage(Array("hello".utf8), replaySafe: true)])
        #expect(connection.resumption == .none)
        let stream = try #require(connection.earlyStream)
        var iterator = stream.messages.makeAsyncIterator()
        #expect(try await iterator.next()?.bytes == Array("hello".utf8))
        await connection.close()
        await server.shutdown()
    }
}

/// Waits (bounded) for the server's ticket to arrive.
/// A relay with 0-RTT on (QUIC and TCP on one stable port, ticket key in `keyFile`; `adjust` changes its
/// configuration), one connection through `client` that saves its resumption state, then the relay shut down.
/// Returns the relay's configuration set to that port (for a restart there), its address and the saved state.
func ticketFromARelayThatWentAway(
    keyFile: String, client: TransportClient, adjust: (inout ServerConfiguration) -> Void = { _ in }
) async throws -> (ServerConfiguration, ServerAddress, ResumptionState) {
    var configuration = Fixtures.serverConfiguration()
    configuration.tcp = "127.0.0.1:0"
    configuration.ticketKeyFile = keyFile
    configuration.earlyData = .enabled()
    adjust(&configuration)
    let first = try await Fixtures.bindOnStablePort(configuration)
    let address = first.quicAddress!
    let firstRelay = Task { await EchoRelay.run(first) }
    let warm = try await client.connect(to: address, earlyMessages: [EarlyMessage([0], replaySafe: true)])
    let saved = try await waitForResumptionState(warm)
    await warm.close()
    firstRelay.cancel()
    await first.shutdown()
    configuration.quic = "127.0.0.1:\(address.port)"
    configuration.tcp = "127.0.0.1:\(address.port)"
    return (configuration, address, saved)
}

func waitForResumptionState(_ connection: TransportConnection) async throws -> ResumptionState {
    let first = try await withTimeout(.seconds(20)) { () -> ResumptionState? in
        for await state in connection.resumptionStates { return state }
        return nil
    }
    guard let first else { throw TransportError(.internalError, "the connection closed before a session ticket") }
    return first
}

/// Relay events collected across tasks.
final class EventLog: @unchecked Sendable {
    // @unchecked Sendable: `events` is only touched under `lock`.
    private let lock = NSLock()
    private var events: [RelayEvent] = []

    func append(_ event: RelayEvent) {
        lock.lock()
        events.append(event)
        lock.unlock()
    }

    func all() -> [RelayEvent] {
        lock.lock()
        defer { lock.unlock() }
        return events
    }

    /// The `isEarly` flag of every message event, in order.
    func messageFlags() -> [Bool] {
        lock.lock()
        defer { lock.unlock() }
        var flags: [Bool] = []
        for case .message(_, _, _, let isEarly) in events { flags.append(isEarly) }
        return flags
    }

    /// The `isEarly` flag of every message event of the second connection that sent messages, in order.
    func messageFlagsOfSecondConnection() -> [Bool] {
        lock.lock()
        defer { lock.unlock() }
        var flags: [Bool] = []
        var remotes: [String] = []
        for case .message(let remote, _, _, let isEarly) in events {
            if !remotes.contains(remote) { remotes.append(remote) }
            if remote == remotes.last && remotes.count == 2 { flags.append(isEarly) }
        }
        return flags
    }
}
