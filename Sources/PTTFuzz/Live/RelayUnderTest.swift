import ChildProcesses
import Foundation
import PTTTalkGroups
import PTTTransport
import TransportCore
import TransportIO

/// The echo relay being fuzzed: a child `ptt-transport serve` (so a crash is counted, not fatal to the fuzzer),
/// or, without an executable (tests), a `TransportServer` in this process. QUIC and TCP share one port.
final class RelayUnderTest: Sendable {
    /// The relay's QUIC (UDP) and TCP address.
    let address: SocketAddress
    private let child: SpawnedProgram?
    private let server: TransportServer?
    private let relay: Task<Void, Never>?
    private let stderrPath: String?
    private let lastChildCPU = Locked(0.0)
    private let deathReported = Locked(false)

    private init(
        address: SocketAddress, child: SpawnedProgram?, server: TransportServer?, relay: Task<Void, Never>?,
        stderrPath: String?
    ) {
        self.address = address
        self.child = child
        self.server = server
        self.relay = relay
        self.stderrPath = stderrPath
    }

    /// Starts a relay: a child of `executable` when given, else in this process.
    static func start(executable: String?, certificates: Certificates, scratch: String) async throws -> RelayUnderTest {
        guard let executable else {
            var configuration = ServerConfiguration(
                quic: "127.0.0.1:0", certificateChain: certificates.chain,
                privateKey: certificates.key)
            configuration.tcp = "127.0.0.1:0"  // port 0 on both: the same port number
            // The fuzzer is one host opening a connection per input: per-address admission limits would refuse
            // it after a few hundred inputs and the rest would never reach the code behind the handshake.
            configuration.perSourceLimits = nil
            configuration.retryAboveConnections = nil
            let server = try await TransportServer.bind(configuration: configuration)
            guard let text = server.quicAddress?.description, let address = SocketAddress(parsing: text) else {
                throw FuzzError("the in-process relay reported no address")
            }
            return RelayUnderTest(
                address: address, child: nil, server: server,
                relay: Task { await EchoRelay.run(server) }, stderrPath: nil)
        }
        let stderrPath = "\(scratch)/relay-\(UUID().uuidString).stderr"
        let process: SpawnedProgram
        do {
            process = try SpawnedProgram(
                executable,
                [
                    "serve", "--listen", "127.0.0.1:0", "--cert", certificates.chain, "--key", certificates.key,
                    "--no-source-limits", "--retry-above", "off",  // one host, a connection per input (see above)
                ], errors: .file(stderrPath))
        } catch {
            throw FuzzError("the child relay did not start: \(error)")
        }
        CrashWitness.killOnCrash(process.processIdentifier)  // a fuzzer that traps must not orphan its relay
        let line = await Blocking.run { readLine(from: process.output) }
        guard line.hasPrefix("listening on "), let address = SocketAddress(parsing: String(line.dropFirst(13))) else {
            process.signal(SIGKILL)
            throw FuzzError("the child relay did not start: \(line)")
        }
        return RelayUnderTest(address: address, child: process, server: nil, relay: nil, stderrPath: stderrPath)
    }

    /// The relay as a client's address.
    var serverAddress: ServerAddress { ServerAddress(host: address.host, port: address.port) }

    /// Why the child relay died — reported once: nil while it runs, and after the first report (so one death is
    /// one crash). Always nil in process: a crash there ends the fuzzer itself.
    func death() -> String? {
        guard let child, !child.isRunning,
            deathReported.withLock({ done in
                defer { done = true }
                return !done
            })
        else { return nil }
        let how =
            child.signaled
            ? "killed by signal \(child.terminationStatus)"
            : "exited with status \(child.terminationStatus)"
        let stderr = stderrPath.flatMap { try? String(contentsOfFile: $0, encoding: .utf8) } ?? ""
        return "the relay \(how); its stderr ends: \(stderr.suffix(2000))"
    }

    /// The child relay's process ID (nil in process).
    var processIdentifier: Int32? { child?.processIdentifier }

    /// Whether the child relay is gone (never true in process).
    var isDead: Bool { child.map { !$0.isRunning } ?? false }

    /// CPU seconds the child relay has used (0 in process: the process's own CPU time includes it); once the
    /// child is gone, the last reading.
    var childCPUSeconds: Double {
        guard let child else { return 0 }
        let reading = CPUTime.process(child.processIdentifier)
        return lastChildCPU.withLock { last in
            last = max(last, reading)
            return last
        }
    }

    /// Stops the relay (SIGTERM for a child, then SIGKILL after 5 s).
    func stop() async {
        if let server {
            await server.shutdown()
            relay?.cancel()
        }
        guard let child, child.isRunning else { return }
        CrashWitness.killOnCrash(0)
        await Blocking.run { child.terminate(within: 5) }
    }
}
