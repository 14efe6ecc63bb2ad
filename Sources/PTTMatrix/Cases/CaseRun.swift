import ChildProcesses
import Foundation
import PTTTransport
import TransportIO

/// One cell being run: its path, its pairing, and the peers it may start.
struct CaseRun: Sendable {
    let path: MatrixPath
    let pairing: Pairing
    let options: MatrixOptions
    let aioquic: AioquicPeers?

    /// How one short connection went, whoever the client was.
    struct Visit: Sendable {
        var ok: Bool
        var resumed = false
        var earlyAccepted = false
        var transport: TransportPath = .quic
        var handshakeMilliseconds = 0.0
        var error = ""
        /// The QUIC version the connection spoke (nil: not known).
        var quicVersion: QUICVersion?
    }

    /// What the server side was, so a case can read its tally.
    enum Server {
        case ours(OurRelay)
        case aioquic(ChildServer)

        var address: ServerAddress? {
            switch self {
            case .ours(let relay): return relay.address
            case .aioquic(let child): return ServerAddress(child.address)
            }
        }

        var relay: OurRelay? {
            if case .ours(let relay) = self { return relay }
            return nil
        }

        func stop() async {
            switch self {
            case .ours(let relay): await relay.stop()
            case .aioquic(let child): _ = await child.stop()
            }
        }
    }

    /// Runs `body`, then stops `server` (also when `body` throws).
    func using<T>(_ server: Server, _ body: () async throws -> T) async throws -> T {
        do {
            let result = try await body()
            await server.stop()
            return result
        } catch {
            await server.stop()
            throw error
        }
    }

    /// One connection to the pairing's server in its default configuration.
    func oneVisit(chacha20Only: Bool = false) async throws -> [Visit] {
        let server = try await startServer()
        return try await using(server) { try await visits(server, chacha20Only: chacha20Only) }
    }

    /// A temporary pcap path for this cell; the case removes it.
    func captureFile(_ name: String) -> String {
        FileManager.default.temporaryDirectory
            .appendingPathComponent("ptt-matrix-\(name)-\(getpid())-\(pairing.rawValue).pcap").path
    }

    func peers() throws -> AioquicPeers {
        guard let aioquic else { throw MatrixError("aioquic is not available") }
        return aioquic
    }

    /// Starts the pairing's server: our relay (configured by `adjust`) or aioquic's echo server (with `arguments`).
    func startServer(
        tcp: Bool = false, certificate: (chain: String, key: String)? = nil,
        adjust: @escaping (inout ServerConfiguration) -> Void = { _ in }, aioquicArguments: [String] = []
    ) async throws -> Server {
        var options = options
        if let certificate {
            options.certificate = certificate.chain
            options.privateKey = certificate.key
        }
        if pairing == .aioquicServer {
            return .aioquic(try await peers().startServer(path, options: options, arguments: aioquicArguments))
        }
        return .ours(try await OurRelay.start(on: path, options: options, tcp: tcp, adjust: adjust))
    }

    /// `count` short connections from the pairing's client, one after another (each resuming the previous one's
    /// session when `resume`; the join message in 0-RTT from the second on when `early`), `parallel` at a time.
    func visits(
        _ server: Server, count: Int = 1, resume: Bool = false, early: Bool = false, parallel: Int = 1,
        waitForTicket: Bool = true, handshakeTimeout: Double = 30, fallback: FallbackPolicy = .quicOnly,
        chacha20Only: Bool = false, aioquicArguments: [String] = []
    ) async throws -> [Visit] {
        guard let address = server.address else { throw MatrixError("the server printed no usable address") }
        if pairing == .aioquicClient {
            let session = FileManager.default.temporaryDirectory
                .appendingPathComponent("ptt-matrix-ticket-\(getpid())-\(UUID().uuidString)").path
            defer { try? FileManager.default.removeItem(atPath: session) }
            return try await inBatches(count, parallel) { index in
                var arguments = ["--messages", "1"] + aioquicArguments
                if resume { arguments += ["--session-file", session] }
                if early && index > 0 { arguments.append("--early") }
                if chacha20Only { arguments.append("--chacha20") }
                let run = try await peers().runClient(
                    path, address, options: options, arguments: arguments, timeout: handshakeTimeout)
                return Visit(
                    ok: run.ok, resumed: run.flag("resumed"), earlyAccepted: run.flag("early_data_accepted"),
                    handshakeMilliseconds: Double(run.integer("handshake_ms")), error: run.error,
                    quicVersion: [1: .version1, 2: .version2][run.integer("quic_version")])
            }
        }
        let client = OurClient.make(
            path, options, fallback: fallback, handshakeTimeout: .milliseconds(Int(handshakeTimeout * 1_000)),
            chacha20Only: chacha20Only)
        if resume {  // each resumes the previous one's session: sequential
            var saved: ResumptionState?
            var results: [Visit] = []
            for index in 0..<count {
                let visit = await ourVisit(client, address, saved, early: early && index > 0, ticket: true)
                results.append(visit.0)
                saved = visit.1 ?? saved
            }
            return results
        }
        return try await inBatches(count, parallel) { _ in
            await ourVisit(client, address, nil, early: false, ticket: waitForTicket).0
        }
    }

    private func ourVisit(
        _ client: TransportClient, _ address: ServerAddress, _ saved: ResumptionState?, early: Bool, ticket: Bool
    ) async -> (Visit, ResumptionState?) {
        do {
            let visit = try await OurClient.visit(client, address, resuming: saved, early: early, waitForTicket: ticket)
            var result = Visit(ok: true, transport: visit.transport, handshakeMilliseconds: visit.handshakeMilliseconds)
            result.quicVersion = visit.quicVersion
            if case .resumed(let early) = visit.resumption {
                result.resumed = true
                result.earlyAccepted = early == .accepted
            }
            return (result, visit.state)
        } catch {
            return (Visit(ok: false, error: "\(error)"), nil)
        }
    }

    private func inBatches(
        _ count: Int, _ parallel: Int, _ body: @escaping @Sendable (Int) async throws -> Visit
    ) async throws -> [Visit] {
        var results: [Visit] = []
        var next = 0
        while next < count {
            let batch = next..<min(count, next + max(1, parallel))
            results += try await withThrowingTaskGroup(of: Visit.self) { group in
                for index in batch { group.addTask { try await body(index) } }
                var collected: [Visit] = []
                for try await visit in group { collected.append(visit) }
                return collected
            }
            next = batch.upperBound
            if count > 1 { options.progress("  \(next)/\(count) connections") }
        }
        return results
    }

    /// "1 handshake" / "N failed: first error".
    static func describe(_ visits: [Visit]) -> String {
        let failed = visits.filter { !$0.ok }
        guard let first = failed.first else {
            let slowest = visits.map(\.handshakeMilliseconds).max() ?? 0
            return "\(visits.count) of \(visits.count) completed (slowest \(Int(slowest)) ms)"
        }
        return "\(failed.count) of \(visits.count) failed: \(first.error)"
    }
}
