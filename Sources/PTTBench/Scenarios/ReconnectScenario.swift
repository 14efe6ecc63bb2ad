import Foundation
import PTTTransport
import TransportIO

/// `reconnect`: how soon a `TransportLink` is back after its connection died, and how soon the relay has answered
/// its rejoin message. Two rows:
/// - `reconnect-network-cut`: UDP is dropped for 200 ms with the relay up (on the emulated path; loopback cannot
///   cut, so there the link is only told the network changed), then restored and `networkChanged()` called.
///   Timed from the restore. The reconnect resumes with 0-RTT, so the target is 1 RTT (≤ 1.05).
/// - `reconnect-relay-restart`: the relay stops and a new process-like relay comes up on the same port with the
///   same ticket key and stateless-reset secret; the client keeps sending audio (a datagram every 20 ms) and
///   learns of the restart from the stateless reset. Timed from the relay being up. On the emulated path the
///   old relay's CONNECTION_CLOSE is lost (UDP dropped while it stops), as after a crash; on loopback it arrives,
///   so the link waits out its first backoff (about 1 s) and only the from-attempt figure is the protocol's.
///   GnuTLS refuses 0-RTT with a ticket older than the relay, so 1-RTT resumption is the floor: target ≤ 2.1 RTT
///   from the attempt's start.
/// Both also report the time from the start of the link's reconnect attempt (its `.connecting` status) to the
/// rejoin answer: what the protocol costs once the link can reconnect.
enum ReconnectScenario {
    static let rejoin = Array("rejoin channel 7".utf8)

    static func run(options: BenchOptions, environment: BenchEnvironment) async throws -> [ScenarioResult] {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("ptt-bench-reconnect-\(ProcessInfo.processInfo.processIdentifier)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var configuration = ServerConfiguration(
            quic: nil, certificateChain: options.certificate, privateKey: options.privateKey)
        configuration.ticketKeyFile = directory.appendingPathComponent("ticket.key").path
        configuration.statelessResetSecretFile = directory.appendingPathComponent("reset.key").path
        configuration.earlyData = .enabled(deliverBeforeHandshake: true)
        var (server, address, relay) = try await SetupScenarios.startRestartableRelay(
            configuration, environment, port: nil)
        let client = environment.client(
            ClientConfiguration(
                serverName: "localhost", trust: .caFile(options.certificateAuthority),
                handshakeTimeout: .seconds(3), fallback: .quicOnly))
        let link = TransportLink(client: client, to: address, rejoin: [EarlyMessage(rejoin, replaySafe: true)])
        let attempts = AttemptLog(link)
        defer { link.stop() }
        let iterations = max(1, min(options.iterations, 10))
        var current = try await within(.seconds(10)) { try await link.nextReady() }
        _ = try await answer(on: current)

        var cut = ScenarioResult(scenario: "reconnect-network-cut", iterations: iterations)
        var cutFromAttempt = Samples()
        var accepted = 0
        for index in 0..<iterations {
            try await waitForFreshState(link, current)
            let previous = current
            environment.network?.dropUDP = true
            try await Task.sleep(for: .milliseconds(200))
            environment.network?.dropUDP = false
            let restored = ContinuousClock.now
            link.networkChanged()
            current = try await timeReconnect(
                of: previous, in: link, since: restored, into: &cut, fromAttempt: &cutFromAttempt, attempts)
            if current.resumption == .resumed(earlyData: .accepted) { accepted += 1 }
            options.progress("reconnect-network-cut: \(index + 1)/\(iterations)")
        }
        cut.figure("zero_rtt_accepted_fraction", Double(accepted) / Double(iterations))
        report(cutFromAttempt, into: &cut, environment)
        if environment.network == nil { cut.note = "loopback: no cut, networkChanged() only" }

        var restart = ScenarioResult(scenario: "reconnect-relay-restart", iterations: iterations)
        var restartFromAttempt = Samples()
        var resumed = 0
        for index in 0..<iterations {
            try await waitForFreshState(link, current)
            // A connection that held for the initial backoff resets the link's backoff (one that died at once
            // would make the next retry wait longer): hold it as a real call would.
            try await Task.sleep(for: .milliseconds(1100))
            let previous = current
            environment.network?.dropUDP = true  // the old relay's CONNECTION_CLOSE is lost, as after a crash
            relay.cancel()
            await server.shutdown()
            environment.network?.dropUDP = false
            (server, _, relay) = try await SetupScenarios.startRestartableRelay(
                configuration, environment, port: address.port)
            let up = ContinuousClock.now
            let audio = Task {
                while !Task.isCancelled {
                    try? previous.sendDatagram([0x55, 0x55, 0x55, 0x55])
                    try? await Task.sleep(for: .milliseconds(20))
                }
            }
            defer { audio.cancel() }
            current = try await timeReconnect(
                of: previous, in: link, since: up, into: &restart, fromAttempt: &restartFromAttempt, attempts)
            if current.resumption != .none { resumed += 1 }
            options.progress("reconnect-relay-restart: \(index + 1)/\(iterations)")
        }
        restart.figure("resumed_fraction", Double(resumed) / Double(iterations))
        report(restartFromAttempt, into: &restart, environment)
        if environment.network == nil {
            restart.note = "loopback: the relay's close arrives, so the link waits out its first backoff"
        }
        link.stop()
        relay.cancel()
        await server.shutdown()
        return [cut, restart]
    }

    /// Waits for the connection that replaces `previous` and for its rejoin answer; records both delays since
    /// `start` in `result`, and the answer's delay since the reconnect attempt began in `fromAttempt`.
    private static func timeReconnect(
        of previous: TransportConnection, in link: TransportLink, since start: ContinuousClock.Instant,
        into result: inout ScenarioResult, fromAttempt: inout Samples, _ attempts: AttemptLog
    ) async throws -> TransportConnection {
        let connection = try await replacement(of: previous, in: link)
        let ready = ContinuousClock.now
        _ = try await answer(on: connection)
        let answered = ContinuousClock.now
        result.handshake.append((ready - start).milliseconds)
        result.firstResponse.append((answered - start).milliseconds)
        if let started = await attempts.lastAttempt(since: start) {
            fromAttempt.append((answered - started).milliseconds)
        }
        return connection
    }

    /// The from-attempt figures, in ms and (on an emulated path) in RTT.
    private static func report(_ samples: Samples, into result: inout ScenarioResult, _ environment: BenchEnvironment) {
        guard let median = samples.p50, let worst = samples.max else { return }
        result.figure("attempt_to_answer_p50_ms", median)
        result.figure("attempt_to_answer_max_ms", worst)
        if let rtt = environment.rttMilliseconds, rtt > 0 {
            result.figure("attempt_to_answer_p50_rtt", median / rtt)
            result.figure("attempt_to_answer_max_rtt", worst / rtt)
        }
    }

    /// The relay's echo of the rejoin message on `connection`.
    private static func answer(on connection: TransportConnection) async throws -> [UInt8] {
        try await within(.seconds(10)) {
            guard let message = try await connection.earlyStream?.nextMessage(), message.bytes == rejoin else {
                throw BenchError("the relay did not answer the rejoin message")
            }
            return message.bytes
        }
    }

    /// The link's next ready connection that is not `old`.
    private static func replacement(
        of old: TransportConnection, in link: TransportLink
    ) async throws
        -> TransportConnection
    {
        try await within(.seconds(30)) {
            while true {
                let next = try await link.nextReady()
                if next !== old { return next }
                try await Task.sleep(for: .milliseconds(1))
            }
        }
    }

    /// Waits until the link holds the ticket `connection` received, so the next reconnect can use it.
    private static func waitForFreshState(_ link: TransportLink, _ connection: TransportConnection) async throws {
        for _ in 0..<400 {
            if let state = connection.resumptionState, link.resumptionState == state { return }
            try await Task.sleep(for: .milliseconds(5))
        }
        throw BenchError("no session ticket within 2 s")
    }

    /// `body`'s value, or a `BenchError` when it fails or takes longer than `limit`.
    /// `body`'s result, or a `BenchError` when it has none within `limit`.
    static func within<T: Sendable>(
        _ limit: Duration, _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        let outcome = await firstResult(within: limit) { () async -> Result<T, any Error>? in
            do { return .success(try await body()) } catch { return .failure(error) }
        }
        guard let outcome else { throw BenchError("no progress within \(limit)") }
        return try outcome.get()
    }
}

/// When each of a link's connect attempts started (its `.connecting` statuses).
actor AttemptLog {
    private var starts: [ContinuousClock.Instant] = []

    init(_ link: TransportLink) {
        var updates = link.statusUpdates.makeAsyncIterator()
        Task {
            while let status = await updates.next() {
                if status == .connecting { await self.record(.now) }
            }
        }
    }

    private func record(_ instant: ContinuousClock.Instant) { starts.append(instant) }

    /// The start of the latest attempt at or after `instant`.
    func lastAttempt(since instant: ContinuousClock.Instant) -> ContinuousClock.Instant? {
        starts.last.flatMap { $0 >= instant ? $0 : nil }
    }
}
