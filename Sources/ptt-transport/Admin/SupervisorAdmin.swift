import CommandLineSupport
import Foundation
import Synchronization
import TransportCore
import TransportIO

/// `serve --workers N --admin HOST:PORT`: one admin endpoint for the host, served by the supervisor, so a balancer
/// polls one `/readyz` per relay. Each worker serves its own on a loopback port the kernel picks and writes that
/// address to a file of the supervisor's private directory (`--admin-address-file`); the supervisor asks them:
/// - `/readyz`: 200 while every worker answers 200; 503 once the supervisor drains (SIGTERM), while a worker is not
///   up yet or restarting, or when one is not ready (listeners, store, drain), naming it.
/// - `/metrics`: the workers' metrics merged (``WorkerMetricsMerge``); 503 when a worker does not answer.
/// - `/healthz`: 200 while the supervisor runs.
final class SupervisorAdmin: Sendable {
    private let http: AdminHTTPServer
    private let state: State

    var address: String { http.address.description }

    /// The file where worker `index` writes its admin address.
    func addressFile(worker index: Int) -> String { state.addressFile(index) }

    /// Starts answering on `text` (checked as `AdminEndpoint.start` does) for `workers` workers whose files go in a
    /// new private directory.
    static func start(_ text: String, allowRemote: Bool, workers: Int) throws -> SupervisorAdmin {
        let endpoint = try AdminEndpoint.parse(text, allowRemote: allowRemote)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ptt-admin-\(getpid())")
        try? FileManager.default.removeItem(at: directory)
        try FileManager.default.createDirectory(
            at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let state = State(directory: directory.path, workers: workers)
        return SupervisorAdmin(http: try AdminHTTPServer(bindingTo: endpoint) { state.respond($0) }, state: state)
    }

    private init(http: AdminHTTPServer, state: State) {
        self.http = http
        self.state = state
    }

    /// A drain began: `/readyz` answers 503 from now on.
    func draining() { state.draining.store(true, ordering: .relaxed) }

    /// Removes the workers' address files (at exit).
    func remove() { try? FileManager.default.removeItem(atPath: state.directory) }

    private final class State: Sendable {
        let directory: String
        let workers: Int
        let draining = Atomic(false)

        init(directory: String, workers: Int) {
            self.directory = directory
            self.workers = workers
        }

        func addressFile(_ index: Int) -> String { "\(directory)/admin.worker-\(index)" }

        /// Worker `index`'s admin address, nil while it has written none.
        private func address(_ index: Int) -> SocketAddress? {
            (try? String(contentsOfFile: addressFile(index), encoding: .utf8)).flatMap {
                SocketAddress(parsing: $0.trimmingCharacters(in: .whitespacesAndNewlines))
            }
        }

        /// Each worker's answer to `path` (nil: not up, or not answering).
        private func ask(_ path: String) -> [(status: Int, body: String)?] {
            (0..<workers).map { index in address(index).flatMap { AdminHTTPClient.get($0, path) } }
        }

        func respond(_ path: String) -> AdminHTTPServer.Response {
            switch path {
            case "/healthz":
                return .init(status: 200, body: "alive\n")
            case "/readyz":
                if draining.load(ordering: .relaxed) { return .init(status: 503, body: "not ready: draining\n") }
                for (index, answer) in ask("/readyz").enumerated() where answer?.status != 200 {
                    let why = answer.map { $0.body.trimmingCharacters(in: .whitespacesAndNewlines) } ?? "not answering"
                    return .init(status: 503, body: "not ready: worker \(index): \(why)\n")
                }
                return .init(status: 200, body: "ready\n")
            case "/metrics":
                let answers = ask("/metrics")
                if let missing = answers.firstIndex(where: { $0?.status != 200 }) {
                    return .init(status: 503, body: "metrics: worker \(missing) did not answer\n")
                }
                return .init(
                    status: 200, contentType: OpenMetricsText.contentType,
                    body: WorkerMetricsMerge.merge(answers.compactMap { $0?.body }))
            default:
                return .init(status: 404, body: "not found: /healthz, /readyz, /metrics\n")
            }
        }
    }
}
