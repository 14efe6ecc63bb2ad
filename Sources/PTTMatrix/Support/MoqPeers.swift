import ChildProcesses
import Foundation

/// moq-dev's QMux (the moq-ffi wheel) driven by Tests/Peers/moq_qmux_peer.py: its client against our relay through
/// the script's TLS bridge, which reads both directions on the wire, and a probe of what its server can listen on.
struct MoqPeers: Sendable {
    let python: String
    let script: String

    /// Finds the script and a Python that imports moq_ffi (`$PTT_PEER_PYTHON`, else `.venv-peers/bin/python`, else
    /// `python3`).
    static func locate(packageRoot: String) async -> Result<MoqPeers, MatrixError> {
        let script = "\(packageRoot)/Tests/Peers/moq_qmux_peer.py"
        guard FileManager.default.isReadableFile(atPath: script) else {
            return .failure(MatrixError("\(script) not found: run from the package root"))
        }
        let venv = "\(packageRoot)/.venv-peers/bin/python"
        let python =
            ProcessInfo.processInfo.environment["PTT_PEER_PYTHON"]
            ?? (FileManager.default.isExecutableFile(atPath: venv) ? venv : "/usr/bin/python3")
        let probe = try? await runProgram(python, ["-c", "import moq_ffi"], timeout: 20)
        guard let probe, !probe.signaled, probe.status == 0 else {
            return .failure(MatrixError("moq-ffi is not importable by \(python) (pip install moq-ffi)"))
        }
        return .success(MoqPeers(python: python, script: script))
    }

    /// Their client against our relay's TLS port `port` on 127.0.0.1: through the bridge, or `direct` (plaintext
    /// QMux to the TLS port).
    func runClient(
        relayPort: Int, options: MatrixOptions, direct: Bool, timeout: Double = 10
    ) async throws
        -> MoqClientRun
    {
        var arguments = [
            script, "client", "--relay-port", "\(relayPort)", "--ca", options.certificateAuthority,
            "--timeout", "\(timeout)",
        ]
        if direct { arguments.append("--direct") }
        return try await decoded(arguments, timeout: timeout)
    }

    /// What a MoqServer can listen on.
    func probeServer() async throws -> MoqServerProbe {
        try await decoded([script, "server-probe"], timeout: 10)
    }

    private func decoded<T: Decodable>(_ arguments: [String], timeout: Double) async throws -> T {
        let run = try await runProgram(python, arguments, timeout: timeout + 20)
        let line = run.stdout.split(separator: "\n").last.map(String.init) ?? ""
        guard !run.signaled, run.status == 0, let value = try? JSONDecoder().decode(T.self, from: Data(line.utf8))
        else {
            let error = run.stderr.trimmingCharacters(in: .whitespacesAndNewlines)
            throw MatrixError(
                "moq_qmux_peer.py \(arguments[1]): "
                    + (error.isEmpty
                        ? "exit status \(run.status), printed \(line.prefix(200))" : String(error.suffix(300))))
        }
        return value
    }
}

/// The JSON line of `moq_qmux_peer.py client` (see its docstring).
struct MoqClientRun: Decodable, Sendable {
    struct Connect: Decodable, Sendable {
        var ok: Bool
        var ms: Double?
        var error: String?
        var moqError: MoqError?

        enum CodingKeys: String, CodingKey {
            case ok, ms, error
            case moqError = "moq_error"
        }
    }

    /// A MoQ-level error their binding reported.
    struct MoqError: Decodable, Sendable {
        var kind: String
        var code: Int
        var message: String
    }

    /// The TLS connection the bridge made to our relay.
    struct TLS: Decodable, Sendable {
        var version: String
        var alpn: String?
        var cipher: String
    }

    var moqFFI: String?
    var mode: String
    var url: String
    var connect: Connect
    var tls: TLS?
    var bridgeError: String?
    /// What their client sent, read on the wire.
    var client: MoqWire?
    /// What our relay sent, read on the wire.
    var server: MoqWire?
    var echo: [Echo]?

    /// A bidirectional stream their client opened and what came back on it.
    struct Echo: Decodable, Sendable {
        var stream: Int
        var sent: Int
        var echoed: Int
        var identical: Bool
    }

    enum CodingKeys: String, CodingKey {
        case mode, url, connect, tls, client, server, echo
        case moqFFI = "moq_ffi"
        case bridgeError = "bridge_error"
    }
}

/// What one side sent on a QMux connection, as the bridge read it.
struct MoqWire: Decodable, Sendable {
    var records: Int
    var largestRecord: Int
    var firstFrame: String?
    /// Parameter name (or hex ID) → value (a number, or "N bytes" for one we do not read).
    var transportParameters: [String: ParameterValue]?
    var applicationProtocols: [String]?
    var frames: [String: Int]
    var streams: [String: Stream]
    var datagrams: [Datagram]
    var pings: [UInt64]
    var pongs: [UInt64]
    var close: Close?
    /// How the direction ended: "eof", "reset: …" or "open".
    var end: String
    /// Rules of the draft this side broke, as the bridge saw them.
    var violations: [String]

    struct Stream: Decodable, Sendable {
        var bytes: Int
        var fin: Bool
        var reset: Reset?
        var stopSending: UInt64?

        enum CodingKeys: String, CodingKey {
            case bytes, fin, reset
            case stopSending = "stop_sending"
        }
    }

    struct Reset: Decodable, Sendable {
        var code: UInt64
    }

    struct Datagram: Decodable, Sendable {
        var type: String
        var bytes: Int
    }

    struct Close: Decodable, Sendable {
        var type: String
        var code: UInt64
        var name: String?
        var reason: String

        /// A transport CONNECTION_CLOSE (0x1c): the sender saw a protocol error.
        var isTransport: Bool { type == "0x1c" }
        var summary: String {
            "CONNECTION_CLOSE \(type) code \(code)\(name.map { " \($0)" } ?? "")"
                + (reason.isEmpty ? "" : " '\(reason.prefix(80))'")
        }
    }

    enum ParameterValue: Decodable, Sendable {
        case number(UInt64)
        case opaque(String)

        init(from decoder: Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let number = try? container.decode(UInt64.self) {
                self = .number(number)
            } else {
                self = .opaque(try container.decode(String.self))
            }
        }

        var number: UInt64? {
            if case .number(let value) = self { return value }
            return nil
        }
    }

    /// "max_datagram_frame_size 16382" style lookups.
    func parameter(_ name: String) -> UInt64? { transportParameters?[name]?.number }

    enum CodingKeys: String, CodingKey {
        case records, frames, streams, datagrams, pings, pongs, close, end, violations
        case largestRecord = "largest_record"
        case firstFrame = "first_frame"
        case transportParameters = "transport_parameters"
        case applicationProtocols = "application_protocols"
    }
}

/// The JSON line of `moq_qmux_peer.py server-probe`.
struct MoqServerProbe: Decodable, Sendable {
    var moqFFI: String?
    var qmuxListener: Bool
    var tcpBindError: String?
    var bound: String?
    var sockets: [String]

    enum CodingKeys: String, CodingKey {
        case bound, sockets
        case moqFFI = "moq_ffi"
        case qmuxListener = "qmux_listener"
        case tcpBindError = "tcp_bind_error"
    }
}
