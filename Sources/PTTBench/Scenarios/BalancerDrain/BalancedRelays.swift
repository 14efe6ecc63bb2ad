import ChildProcesses
import Foundation
import Glibc
import NetworkEmulation
import TransportCore

/// The relays `balancer-drain` puts behind one virtual address: `count` `ptt-transport serve` children on loopback,
/// each on stable ports of its own (QUIC and TCP on one, `--admin` on another) so it comes back where the balancer
/// looks for it, sharing one ticket key, reset secret and token secret (a phone resumes at whichever it reaches).
final class BalancedRelays: @unchecked Sendable {
    // @unchecked Sendable invariant: `children` is changed only by the scenario's one task (drain, restart, stop).
    let executable: String
    let arguments: [String]
    let ports: [(relay: UInt16, admin: UInt16)]
    private(set) var children: [ChildServer]
    private let directory: URL

    private init(
        executable: String, arguments: [String], ports: [(UInt16, UInt16)], children: [ChildServer], directory: URL
    ) {
        self.executable = executable
        self.arguments = arguments
        self.ports = ports
        self.children = children
        self.directory = directory
    }

    /// The balancer's view of them.
    var backends: [ReadinessBalancer.Backend] {
        ports.map {
            ReadinessBalancer.Backend(
                udp: SocketAddress(host: "127.0.0.1", port: $0.relay)!,
                tcp: SocketAddress(host: "127.0.0.1", port: $0.relay)!,
                admin: SocketAddress(host: "127.0.0.1", port: $0.admin)!)
        }
    }

    /// Starts `count` relays of `executable` with `drainNotice` seconds of `--drain-notice`.
    static func start(
        _ count: Int, executable: String, options: BenchOptions, drainNotice: Double, drainSeconds: Int
    ) async throws -> BalancedRelays {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ptt-bench-balancer-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let arguments = [
            "--cert", options.certificate, "--key", options.privateKey,
            "--ticket-key", directory.appendingPathComponent("ticket.key").path,
            "--reset-secret", directory.appendingPathComponent("reset.secret").path,
            "--token-secret", directory.appendingPathComponent("token.secret").path,
            "--drain-seconds", "\(drainSeconds)", "--drain-notice", "\(drainNotice)",
        ]
        var ports: [(UInt16, UInt16)] = []
        var children: [ChildServer] = []
        do {
            for index in 0..<count {
                let (pair, child) = try await StablePort.first(attempts: 20) { relayPort in
                    let adminPort = StablePort.random()
                    let child = try await Self.spawn(
                        executable, arguments, index: index, relay: relayPort, admin: adminPort)
                    return ((relayPort, adminPort), child)
                }
                ports.append(pair)
                children.append(child)
            }
        } catch {
            for child in children { child.stopNow() }
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
        return BalancedRelays(
            executable: executable, arguments: arguments, ports: ports, children: children, directory: directory)
    }

    private static func spawn(
        _ executable: String, _ arguments: [String], index: Int, relay: UInt16, admin: UInt16
    ) async throws -> ChildServer {
        try await ChildServer.start(
            executable,
            [
                "serve", "--listen", "127.0.0.1:\(relay)", "--admin", "127.0.0.1:\(admin)",
                "--relay-id", "balanced-\(index)",
            ] + arguments)
    }

    /// SIGTERM to relay `index` (it drains); returns once it exited (true) or `within` passed (false).
    func drain(_ index: Int, within: Duration) async -> Bool {
        let child = children[index]
        kill(child.processIdentifier, SIGTERM)
        let deadline = ContinuousClock.now + within
        while child.isRunning {
            guard ContinuousClock.now < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return true
    }

    /// Starts relay `index` again on its ports (a few tries: the ports were just released).
    func restart(_ index: Int) async throws {
        children[index].stopNow()
        var lastError: (any Error)?
        for _ in 0..<20 {
            do {
                children[index] = try await Self.spawn(
                    executable, arguments, index: index, relay: ports[index].relay, admin: ports[index].admin)
                return
            } catch {
                lastError = error
                try await Task.sleep(for: .milliseconds(100))
            }
        }
        throw lastError ?? BenchError("relay \(index) did not start again")
    }

    func stop() {
        for child in children { child.stopNow() }
        try? FileManager.default.removeItem(at: directory)
    }
}
