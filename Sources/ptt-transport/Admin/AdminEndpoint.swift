import CommandLineSupport
import Dispatch
import Foundation
import PTTTalkGroups
import PTTTransport
import Synchronization
import TransportCore
import TransportIO

/// `serve --admin HOST:PORT`: the relay's health, readiness and metrics over HTTP/1.1 for a load balancer and a
/// scraper, on a thread of its own (``AdminHTTPServer``). Loopback only unless `--admin-allow-remote`: the endpoint
/// has no authentication.
/// - `/healthz`: 200 while the process runs.
/// - `/readyz`: 200 once the listeners are up; 503 before, while draining, and while a configured anti-replay store
///   has never answered — a balancer polling it stops sending new flows before the relay asks its clients to move.
/// - `/metrics`: OpenMetrics text (``OpenMetricsText``).
final class AdminEndpoint: Sendable {
    private let http: AdminHTTPServer
    private let box: ServerBox

    /// The bound address, with the real port when asked for port 0.
    var address: String { http.address.description }

    /// Parses and checks `text` (`HOST:PORT`, numeric host) and starts answering; readiness stays 503 until
    /// `serving(_:)`.
    static func start(_ text: String, allowRemote: Bool) throws -> AdminEndpoint {
        try AdminEndpoint(parse(text, allowRemote: allowRemote))
    }

    /// `text` as the endpoint's address, refused when it does not parse or is not loopback without `allowRemote`.
    static func parse(_ text: String, allowRemote: Bool) throws -> SocketAddress {
        guard let address = SocketAddress(parsing: text) else {
            throw Arguments.Failure(
                description: "--admin \(text): use HOST:PORT with a numeric host, e.g. 127.0.0.1:9090")
        }
        guard allowRemote || Self.isLoopback(address) else {
            throw Arguments.Failure(
                description: "--admin \(text) is not a loopback address: the endpoint has no authentication; "
                    + "add --admin-allow-remote to serve it there anyway (behind a firewall)")
        }
        return address
    }

    private init(_ address: SocketAddress) throws {
        let box = ServerBox()
        http = try AdminHTTPServer(bindingTo: address) { path in box.respond(path) }
        self.box = box
    }

    /// The listeners are up: readiness follows the server's state from now on.
    func serving(_ server: TransportServer) { box.server.withLock { $0 = server } }

    /// The relay runs talk groups: `/metrics` serves their families too.
    func serving(talkGroups relay: TalkGroupRelay) { box.talkGroups.withLock { $0 = relay } }

    func stop() { http.stop() }

    /// Writes `address` to `file` (a worker of `--workers` telling its supervisor where its endpoint is): to a
    /// temporary file renamed over it, so the supervisor never reads half an address.
    static func announce(_ address: String, in file: String) throws {
        let temporary = file + ".new"
        guard FileManager.default.createFile(atPath: temporary, contents: Data(address.utf8)),
            rename(temporary, file) == 0
        else { throw Arguments.Failure(description: "--admin-address-file \(file): cannot write it") }
    }

    static func isLoopback(_ address: SocketAddress) -> Bool {
        address.isIPv6 ? address.host == "::1" : address.host.hasPrefix("127.")
    }
}

/// What the admin thread answers from: the server once it listens. Shared between the endpoint and the responder.
private final class ServerBox: Sendable {
    let server = Mutex<TransportServer?>(nil)
    let talkGroups = Mutex<TalkGroupRelay?>(nil)

    func respond(_ path: String) -> AdminHTTPServer.Response {
        let server = server.withLock { $0 }
        switch path {
        case "/healthz":
            return .init(status: 200, body: "alive\n")
        case "/readyz":
            guard let server else { return .init(status: 503, body: "not ready: the listeners are not up yet\n") }
            if server.draining.withLock({ $0 }) { return .init(status: 503, body: "not ready: draining\n") }
            if server.antiReplayStoreAnswered == false {
                return .init(status: 503, body: "not ready: the anti-replay store has never answered\n")
            }
            return .init(status: 200, body: "ready\n")
        case "/metrics":
            return metrics(server)
        default:
            return .init(status: 404, body: "not found: /healthz, /readyz, /metrics\n")
        }
    }

    /// Gathers the server's counters (a short task on each event loop) and renders them; 503 when that takes more
    /// than 2 s (the loops are overloaded: the scrape is not worth waiting for).
    private func metrics(_ server: TransportServer?) -> AdminHTTPServer.Response {
        let result = Mutex<String?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task {
            let metrics = await server?.relayMetrics()
            let groups = talkGroups.withLock { $0 }?.statistics
            result.withLock { $0 = OpenMetricsText.render(metrics, talkGroups: groups) }
            done.signal()
        }
        guard done.wait(timeout: .now() + 2) == .success, let text = result.withLock({ $0 }) else {
            return .init(status: 503, body: "metrics not gathered within 2 s\n")
        }
        return .init(status: 200, contentType: OpenMetricsText.contentType, body: text)
    }
}
