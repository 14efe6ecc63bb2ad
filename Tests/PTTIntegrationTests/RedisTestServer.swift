import ChildProcesses
import Foundation
import Glibc
import TransportCore
import TransportIO

/// A `redis-server` of the test's own (`.ci/setup` installs Debian's package; the system service is not used): on a
/// loopback port outside the ephemeral range, without persistence (`--save '' --appendonly no`), in a temporary
/// directory. It can be paused (SIGSTOP: a Redis that answers nothing), stopped, and started again on the same port
/// (empty: a Redis that lost its memory). Killed when released. `startTLS` adds a TLS port (Debian's redis-server is
/// built with TLS) serving `certs/server.pem` (localhost, 127.0.0.1); the test's own client stays on the plain port.
final class RedisTestServer: @unchecked Sendable {
    // @unchecked Sendable invariant: `program` is touched only by the one test task that owns this server.
    static let executable = "/usr/bin/redis-server"
    static var available: Bool { FileManager.default.isExecutableFile(atPath: executable) }

    let port: UInt16
    let directory: URL
    /// More `redis-server` options (`--maxmemory 4mb`, ...), given at every start.
    let options: [String]
    private var program: SpawnedProgram?

    /// `AUTH` this test's own client sends (a server started with `--requirepass`).
    let auth: [String]?
    /// The TLS port (`startTLS`), nil without.
    let tlsPort: UInt16?

    private init(port: UInt16, directory: URL, options: [String], auth: [String]? = nil, tlsPort: UInt16? = nil) {
        self.auth = auth
        self.tlsPort = tlsPort
        self.port = port
        self.directory = directory
        self.options = options
    }

    /// A running server on a free stable port, with `options` added to its command line.
    static func start(options: [String] = [], auth: [String]? = nil) async throws -> RedisTestServer {
        try await StablePort.first(attempts: 20) { port in
            // A directory per attempt: a server that failed to start removes its own when released.
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
                "ptt-redis-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let server = RedisTestServer(port: port, directory: directory, options: options, auth: auth)
            try await server.start()
            return server
        }
    }

    /// A running server with a TLS port too (`--tls-port`, certificate `certificate`/`key`, clients not asked for a
    /// certificate), with `options` added.
    static func startTLS(
        options: [String] = [], auth: [String]? = nil, certificate: String = Fixtures.serverCert,
        key: String = Fixtures.serverKey
    ) async throws -> RedisTestServer {
        try await StablePort.first(attempts: 20) { port in
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
                "ptt-redis-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            var tlsPort = StablePort.random()
            while tlsPort == port { tlsPort = StablePort.random() }
            let tls = [
                "--tls-port", "\(tlsPort)", "--tls-cert-file", certificate, "--tls-key-file", key,
                "--tls-ca-cert-file", Fixtures.ca, "--tls-auth-clients", "no",
            ]
            let server = RedisTestServer(
                port: port, directory: directory, options: tls + options, auth: auth, tlsPort: tlsPort)
            try await server.start()
            return server
        }
    }

    /// The anti-replay URL of this server, with generous test options (a 1 s deadline: a loaded machine running
    /// the whole suite can take hundreds of milliseconds to answer, and only the waking phone waits for it; no
    /// clock-skew allowance: every relay runs on this host's clock).
    var url: String { "redis://127.0.0.1:\(port)?deadline-ms=1000&clock-skew-ms=0" }

    /// The anti-replay URL of its TLS port (`startTLS`), as `user` when given, at `host` (a name its certificate
    /// carries: localhost or 127.0.0.1).
    func tlsURL(user: String? = nil, host: String = "127.0.0.1") -> String {
        "rediss://\(user.map { "\($0)@" } ?? "")\(host):\(tlsPort ?? 0)?deadline-ms=1000&clock-skew-ms=0"
    }

    /// Starts it (again) on `port` and waits until it answers PING; throws if it does not within 10 s.
    func start() async throws {
        let program = try SpawnedProgram(
            Self.executable,
            [
                "--port", "\(port)", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", directory.path,
                "--daemonize", "no",
            ] + (options.contains("--maxmemory-policy") ? [] : ["--maxmemory-policy", "noeviction"]) + options,
            output: .file(directory.appendingPathComponent("redis.log").path), errors: .standardOutput)
        self.program = program
        let deadline = ContinuousClock.now.advanced(by: .seconds(10))
        while ContinuousClock.now < deadline {
            if !program.isRunning { break }
            if ping() { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        program.terminate(within: 2)
        self.program = nil
        throw ChildProcessError("redis-server did not start on port \(port)")
    }

    /// Whether it answers PING now (with our own client).
    func ping() -> Bool {
        guard let address = SocketAddress(host: "127.0.0.1", port: port) else { return false }
        let connection = RedisConnection(addresses: [address], database: 0, auth: auth)
        let replies = try? connection.call([["PING"]], deadline: MonotonicClock.now() + 500_000_000)
        return replies == [.simpleString("PONG")]
    }

    /// Runs one command with our own client (2 s at most): its reply.
    @discardableResult
    func command(_ arguments: [String]) throws -> RESPValue {
        guard let address = SocketAddress(host: "127.0.0.1", port: port) else {
            throw ChildProcessError("no address for port \(port)")
        }
        let connection = RedisConnection(addresses: [address], database: 0, auth: auth, maxReplyBytes: 1 << 20)
        guard let reply = try connection.call([arguments], deadline: MonotonicClock.now() + 2_000_000_000).first else {
            throw ChildProcessError("no reply to \(arguments.first ?? "")")
        }
        return reply
    }

    /// The fleet's claims key (`RedisClaimScript`) under the default prefix, and its members: the marker and one
    /// digest per ticket claimed.
    static let claimsKey = "ptt-0rtt:claims"
    func claimCount() throws -> Int {
        guard case .integer(let count) = try command(["ZCARD", Self.claimsKey]) else { return -1 }
        return Int(count)
    }

    func pause() { program?.signal(SIGSTOP) }
    func resume() { program?.signal(SIGCONT) }

    /// Stops it (SIGTERM; without persistence, everything it held is gone).
    func stop() {
        program?.signal(SIGCONT)
        program?.terminate(within: 5)
        program = nil
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(at: directory)
    }
}
