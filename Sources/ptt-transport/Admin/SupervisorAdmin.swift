import CommandLineSupport
import Foundation
import Synchronization
import TransportCore
import TransportIO

/// `serve --workers N --admin HOST:PORT`: one admin endpoint for the host, served by the supervisor, so a balancer
/// polls one `/readyz` per relay. Each worker serves its own on a loopback port the kernel picks and writes that
/// address to its slot's file in the supervisor's private directory (`--admin-address-file`; a slot per worker and
/// generation, `WorkerSlots`); the supervisor asks them:
/// - `/readyz`: 200 while every worker of the serving generation answers 200; 503 once the supervisor drains
///   (SIGTERM), while a worker is not up yet or restarting, or when one is not ready (listeners, store, drain),
///   naming it. An old generation draining after an upgrade is not asked: the host serves through its successor.
/// - `/metrics`: the workers' metrics merged (``WorkerMetricsMerge``) — the serving generation's and, during an
///   upgrade's overlap, the draining generation's too, so its counters and connections stay in the host's figures
///   until it exits; 503 when a worker of the serving generation does not answer.
/// - `/healthz`: 200 while the supervisor runs.
final class SupervisorAdmin: Sendable {
    private let http: AdminHTTPServer
    private let state: State

    var address: String { http.address.description }

    /// The file where the worker of `slot` writes its admin address.
    func addressFile(slot: Int) -> String { state.addressFile(slot) }

    /// Starts answering on `text` (checked as `AdminEndpoint.start` does) for the workers of `slots`, whose files go
    /// in a new private directory.
    static func start(_ text: String, allowRemote: Bool, slots: WorkerSlots) throws -> SupervisorAdmin {
        let endpoint = try AdminEndpoint.parse(text, allowRemote: allowRemote)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ptt-admin-\(getpid())")
        try? FileManager.default.removeItem(at: directory)
        try FileManager.default.createDirectory(
            at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let state = State(directory: directory.path, slots: slots)
        return SupervisorAdmin(http: try AdminHTTPServer(bindingTo: endpoint) { state.respond($0) }, state: state)
    }

    private init(http: AdminHTTPServer, state: State) {
        self.http = http
        self.state = state
    }

    /// A drain began: `/readyz` answers 503 from now on.
    func draining() { state.draining.store(true, ordering: .relaxed) }

    /// An upgrade made `set` the serving generation: `/readyz` follows its workers from now on.
    func serving(set: Int) { state.serving.store(set, ordering: .relaxed) }

    /// The worker of `slot` ended: its address is forgotten until its successor writes one.
    func ended(slot: Int) { try? FileManager.default.removeItem(atPath: state.addressFile(slot)) }

    /// Removes the workers' address files (at exit).
    func remove() { try? FileManager.default.removeItem(atPath: state.directory) }

    private final class State: Sendable {
        let directory: String
        /// Where each generation's workers sit.
        let slots: WorkerSlots
        let draining = Atomic(false)
        /// The serving generation's set (0 or 1).
        let serving = Atomic(0)

        init(directory: String, slots: WorkerSlots) {
            self.directory = directory
            self.slots = slots
        }

        func addressFile(_ slot: Int) -> String { "\(directory)/admin.slot-\(slot)" }

        /// The admin address of the worker in `slot`, nil while it has written none.
        private func address(_ slot: Int) -> SocketAddress? {
            (try? String(contentsOfFile: addressFile(slot), encoding: .utf8)).flatMap {
                SocketAddress(parsing: $0.trimmingCharacters(in: .whitespacesAndNewlines))
            }
        }

        /// The answer to `path` of each worker of `set` (nil: not up, or not answering), in worker order.
        private func ask(_ path: String, set: Int) -> [(status: Int, body: String)?] {
            slots.slots(set: set).map { slot in address(slot).flatMap { AdminHTTPClient.get($0, path) } }
        }

        func respond(_ path: String) -> AdminHTTPServer.Response {
            let serving = serving.load(ordering: .relaxed)
            switch path {
            case "/healthz":
                return .init(status: 200, body: "alive\n")
            case "/readyz":
                if draining.load(ordering: .relaxed) { return .init(status: 503, body: "not ready: draining\n") }
                for (index, answer) in ask("/readyz", set: serving).enumerated() where answer?.status != 200 {
                    let why = answer.map { $0.body.trimmingCharacters(in: .whitespacesAndNewlines) } ?? "not answering"
                    return .init(status: 503, body: "not ready: worker \(index): \(why)\n")
                }
                return .init(status: 200, body: "ready\n")
            case "/metrics":
                let answers = ask("/metrics", set: serving)
                if let missing = answers.firstIndex(where: { $0?.status != 200 }) {
                    return .init(status: 503, body: "metrics: worker \(missing) did not answer\n")
                }
                // The other set: an old generation still draining (or a new one starting), when it answers.
                let others = ask("/metrics", set: 1 - serving).compactMap { $0?.status == 200 ? $0?.body : nil }
                return .init(
                    status: 200, contentType: OpenMetricsText.contentType,
                    body: WorkerMetricsMerge.merge(answers.compactMap { $0?.body }, alongside: others))
            default:
                return .init(status: 404, body: "not found: /healthz, /readyz, /metrics\n")
            }
        }
    }
}
