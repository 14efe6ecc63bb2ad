import ChildProcesses
import Foundation
import Glibc
import PTTTalkGroups
import PTTTransport
import TestSupport
import Testing
import TransportCore

/// Bad input on the TCP fallback end to end (issue 4): a QMux peer that breaks the protocol, TLS servers that are
/// misconfigured (TLS 1.2 only, no ALPN, another ALPN), and our server's TCP port fed garbage or refused TLS
/// clients. Every case ends in a clear `TransportError` or a refused handshake, never a hang, a crash or a
/// connection on a weaker path, and the next good connection works.
@Suite("TCP fallback bad input: clear errors, no weaker fallback, the server stays up", .integration)
struct TCPBadInputTests {
    static let peers = "\(Fixtures.root)/Tests/Peers"

    /// The peers here need only Python's standard library. Without python3 the tests are skipped, or fail when
    /// PTT_REQUIRE_PEERS=1 (CI).
    static func python() -> String? {
        let path = "/usr/bin/python3"
        if FileManager.default.isExecutableFile(atPath: path) { return path }
        if peersRequired { Issue.record("python3 is missing and PTT_REQUIRE_PEERS=1") }
        return nil
    }

    // MARK: - Our client against a QMux peer that breaks the protocol

    /// A `qmux_peer.py server --bad MODE` and the QUIC transport error our client must close it with.
    struct BadQMuxPeer: Sendable, CustomTestStringConvertible {
        let mode: String
        let transportError: UInt64
        /// The error's name as the peer prints it.
        let name: String
        var testDescription: String { mode }

        static let all = [
            BadQMuxPeer(mode: "wrong-first-frame", transportError: 0x08, name: "TRANSPORT_PARAMETER_ERROR"),
            BadQMuxPeer(mode: "prohibited-frame", transportError: 0x07, name: "FRAME_ENCODING_ERROR"),
            BadQMuxPeer(mode: "truncated-record", transportError: 0x07, name: "FRAME_ENCODING_ERROR"),
            BadQMuxPeer(mode: "garbage", transportError: 0x07, name: "FRAME_ENCODING_ERROR"),
        ]
    }

    /// Racing reaches the peer over TCP too: nothing listens on its UDP port, so QUIC gets ICMP port unreachable.
    @Test(arguments: BadQMuxPeer.all, [FallbackPolicy.tcpOnly, .race()])
    func aQMuxPeerBreakingTheProtocolGetsAClearErrorAndTheNextConnectionWorks(
        peer bad: BadQMuxPeer, policy: FallbackPolicy
    ) async throws {
        try await Self.firstFailure(
            against: [
                "\(Self.peers)/qmux_peer.py", "server", "--cert", Fixtures.serverCert, "--key", Fixtures.serverKey,
                "--port", "0", "--bad", bad.mode,
            ], policy: policy, accepted: "a peer sending \(bad.mode)"
        ) { error, peer in
            #expect(error.code == .protocolViolation, "\(error)")
            #expect(error.transportErrorCode == bad.transportError, "\(error)")
            #expect(error.message.contains("QMux"), "\(error)")

            // The peer was told why: our CONNECTION_CLOSE carries the transport error code.
            let closed = await peer.line(startingWith: "closed:", within: .seconds(10))
            let expected = "peer transport close: \(bad.name) (0x\(String(bad.transportError, radix: 16)))"
            #expect(closed?.contains(expected) == true, "peer printed: \(closed ?? "nothing")")
        }
    }

    // MARK: - Our client against misconfigured TLS servers

    /// A `tls_misconfigured_server.py` configuration and the error our client must fail with.
    struct MisconfiguredTLS: Sendable, CustomTestStringConvertible {
        let flags: [String]
        let code: TransportError.Code
        var testDescription: String { flags.joined(separator: " ") }

        static let all = [
            MisconfiguredTLS(flags: ["--tls12-only"], code: .tlsFailure),
            MisconfiguredTLS(flags: ["--no-alpn"], code: .alpnMismatch),
            // QUIC's ALPN over TLS on TCP: a QUIC-only relay's ALPN is not QMux's.
            MisconfiguredTLS(flags: ["--alpn", "ptt/1"], code: .alpnMismatch),
        ]
    }

    @Test(arguments: MisconfiguredTLS.all, [FallbackPolicy.tcpOnly, .race()])
    func aMisconfiguredTLSServerFailsTheHandshakeWithTheTLSOrALPNError(
        server misconfiguration: MisconfiguredTLS, policy: FallbackPolicy
    ) async throws {
        try await Self.firstFailure(
            against: [
                "\(Self.peers)/tls_misconfigured_server.py", "--cert", Fixtures.serverCert, "--key",
                Fixtures.serverKey, "--port", "0",
            ] + misconfiguration.flags, policy: policy, accepted: "a server with \(misconfiguration.testDescription)"
        ) { error, peer in
            #expect(error.code == misconfiguration.code, "\(error)")
            #expect(!error.message.isEmpty)
            #expect(!error.message.contains("neither QUIC nor TCP"), "a final error is reported alone: \(error)")

            // What the server saw: no TLS 1.2 session was ever negotiated; without our ALPN, TLS 1.3 completed on its
            // side and our client refused the connection.
            let handshake = await peer.line(startingWith: "handshake", within: .seconds(10))
            if misconfiguration.code == .tlsFailure {
                #expect(handshake?.hasPrefix("handshake failed") == true, "server printed: \(handshake ?? "nothing")")
            } else {
                #expect(handshake == "handshake ok: TLSv1.3 None", "server printed: \(handshake ?? "nothing")")
            }
        }
    }

    // MARK: - A certificate or ALPN failure on either path is final

    /// A QUIC server that must be refused, on the same port number as a working TCP (QMux) server.
    struct RefusedQUICServer: Sendable, CustomTestStringConvertible {
        let cert: String
        let key: String
        let alpn: String
        let code: TransportError.Code
        let testDescription: String

        static let all = [
            RefusedQUICServer(
                cert: Fixtures.untrustedCert, key: Fixtures.untrustedKey, alpn: "ptt/1",
                code: .certificateUntrusted, testDescription: "untrusted certificate"),
            RefusedQUICServer(
                cert: Fixtures.serverCert, key: Fixtures.serverKey, alpn: "other/9",
                code: .alpnMismatch, testDescription: "another ALPN"),
        ]
    }

    @Test(arguments: RefusedQUICServer.all)
    func aCertificateOrALPNFailureOverQUICNeverFallsBackToAWorkingTCPPath(
        quic refused: RefusedQUICServer
    )
        async throws
    {
        let quicServer = try await TransportServer.bind(
            configuration: Fixtures.serverConfiguration(
                cert: refused.cert, key: refused.key, alpn: refused.alpn))
        let quicRelay = Task { await EchoRelay.run(quicServer) }
        defer { quicRelay.cancel() }
        let address = try #require(quicServer.quicAddress)
        var tcpConfiguration = Fixtures.serverConfiguration()
        tcpConfiguration.quic = nil
        tcpConfiguration.tcp = address.description
        let tcpServer = try await TransportServer.bind(configuration: tcpConfiguration)
        let tcpRelay = Task { await EchoRelay.run(tcpServer) }
        defer { tcpRelay.cancel() }

        // The TCP path works on its own...
        let tcp = try await withTimeout { try await TCPFallbackTests.client(.tcpOnly).connect(to: address) }
        #expect(tcp.path == .tcp)
        await tcp.close()
        // ...but racing stops at QUIC's refusal. (TCP waits a second unless QUIC fails in a way that allows it.)
        let failure = try await withTimeout {
            await Self.firstFailure(TCPFallbackTests.client(.race(tcpAfter: .seconds(1))), address)
        }
        #expect(failure?.code == refused.code, "\(failure.map { "\($0)" } ?? "connected")")
        await quicServer.shutdown()
        await tcpServer.shutdown()
    }

    /// UDP blocked (by an attacker, say) and a TCP server with a bad certificate: the certificate error, alone.
    struct BadCertificate: Sendable, CustomTestStringConvertible {
        let cert: String
        let key: String
        let code: TransportError.Code
        var testDescription: String { code.name }

        static let all = [
            BadCertificate(cert: Fixtures.untrustedCert, key: Fixtures.untrustedKey, code: .certificateUntrusted),
            BadCertificate(cert: Fixtures.expiredCert, key: Fixtures.expiredKey, code: .certificateExpired),
        ]
    }

    @Test(arguments: BadCertificate.all)
    func aCertificateFailureOverTCPIsFinalWhenUDPIsUnreachable(certificate: BadCertificate) async throws {
        let code = certificate.code
        var configuration = Fixtures.serverConfiguration(cert: certificate.cert, key: certificate.key)
        configuration.quic = nil
        configuration.tcp = "127.0.0.1:0"
        let server = try await TransportServer.bind(configuration: configuration)
        let relay = Task { await EchoRelay.run(server) }
        defer { relay.cancel() }
        let address = try #require(server.tcpAddress)
        let failure = try await withTimeout { await Self.firstFailure(TCPFallbackTests.client(.race()), address) }
        #expect(failure?.code == code, "\(failure.map { "\($0)" } ?? "connected")")
        #expect(failure?.message.contains("neither QUIC nor TCP") == false, "a final error is reported alone")
        await server.shutdown()
    }

    // MARK: - Our server's TCP port fed garbage

    /// Bytes a plain TCP client sends to our QMux port before it waits for the server to hang up.
    struct RawInput: Sendable, CustomTestStringConvertible {
        let testDescription: String
        let bytes: [UInt8]
        /// Send FIN after the bytes (otherwise the connection stays open until the server ends it).
        var halfClose = false

        static let all: [RawInput] = {
            var generator = SplitMix64(seed: 0x7c9)
            let random = (0..<2048).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let clientHelloStart: [UInt8] = [0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03]
            return [
                RawInput(testDescription: "random bytes", bytes: random),
                RawInput(
                    testDescription: "a plaintext HTTP request",
                    bytes: Array("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n".utf8)),
                // A QMux client that forgot TLS: one record holding an empty QX_TRANSPORT_PARAMETERS.
                RawInput(
                    testDescription: "plaintext QMux",
                    bytes: [0x09, 0xff, 0x51, 0x53, 0x30, 0x0d, 0x0a, 0x0d, 0x0a, 0x00]),
                RawInput(
                    testDescription: "a TLS record header announcing 65535 bytes",
                    bytes: [0x16, 0x03, 0x01, 0xff, 0xff] + random.prefix(64)),
                RawInput(
                    testDescription: "a fatal TLS alert instead of a ClientHello",
                    bytes: [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28]),
                RawInput(
                    testDescription: "a truncated ClientHello, then FIN",
                    bytes: clientHelloStart + random.prefix(32), halfClose: true),
                RawInput(testDescription: "nothing, then FIN", bytes: [], halfClose: true),
            ]
        }()
    }

    @Test(arguments: RawInput.all)
    func garbageOnOurTCPPortIsDroppedAndTheNextClientIsServed(input: RawInput) async throws {
        let (server, address, relay) = try await Self.tcpServer()
        defer { relay.cancel() }
        let outcome = try await withTimeout {
            await RawTCP.exchange(
                port: address.port, sending: input.bytes,
                halfClose: input.halfClose)
        }
        #expect(outcome.end == .closedByServer, "the server ended the connection (\(outcome.end))")
        #expect(
            outcome.received.isEmpty || outcome.received.first == 0x15,
            "the server answered with nothing but a TLS alert: \(outcome.received.prefix(16))")
        try await Self.expectNoConnectionsLeft(server)
        try await Self.expectGoodConnection(TCPFallbackTests.client(.tcpOnly), to: address)
        await server.shutdown()
    }

    /// `tls_misconfigured_server.py --connect` options: TLS clients our server must refuse in the handshake.
    @Test(arguments: [["--no-alpn"], ["--alpn", "other/9"], ["--alpn", "ptt/1"], ["--tls12-only"]])
    func tlsClientsWithoutQMuxALPNOrTLS13AreRefusedAndTheNextClientIsServed(flags: [String]) async throws {
        guard let python = Self.python() else { return }
        let (server, address, relay) = try await Self.tcpServer()
        defer { relay.cancel() }
        let result = try await runProgram(
            python,
            [
                "\(Self.peers)/tls_misconfigured_server.py", "--connect", "\(address.port)", "--ca", Fixtures.ca,
                "--server-name", "localhost",
            ] + flags)
        let report = jsonObject(result.stdout)
        #expect(report?["ok"] as? Bool == false, "\(result.stdout) \(result.stderr)")
        // GnuTLS answers a TLS 1.2 ClientHello with handshake_failure ("no supported cipher suites").
        let alert = flags == ["--tls12-only"] ? "alert handshake failure" : "alert no application protocol"
        #expect(
            (report?["error"] as? String)?.lowercased().contains(alert) == true,
            "the server sent \(alert): \(result.stdout)")
        try await Self.expectNoConnectionsLeft(server)
        try await Self.expectGoodConnection(TCPFallbackTests.client(.tcpOnly), to: address)
        await server.shutdown()
    }

    /// Plaintext a client sends after completing TLS with our QMux ALPN, and the QUIC transport error our server
    /// must close the connection with.
    struct BadQMuxClient: Sendable, CustomTestStringConvertible {
        let testDescription: String
        let plaintext: [UInt8]
        let transportError: UInt64

        /// A record holding an empty QX_TRANSPORT_PARAMETERS (every parameter at its default).
        static let parameters: [UInt8] = [0x09, 0xff, 0x51, 0x53, 0x30, 0x0d, 0x0a, 0x0d, 0x0a, 0x00]
        static let all = [
            BadQMuxClient(
                testDescription: "QX_PING before QX_TRANSPORT_PARAMETERS",
                plaintext: [0x09, 0xf4, 0x8c, 0x67, 0x52, 0x9e, 0xf8, 0xc7, 0xbd, 0x00],
                transportError: 0x08),
            BadQMuxClient(
                testDescription: "STREAM before QX_TRANSPORT_PARAMETERS",
                plaintext: [0x04, 0x0a, 0x00, 0x01, 0x78], transportError: 0x08),
            BadQMuxClient(
                testDescription: "QX_TRANSPORT_PARAMETERS twice",
                plaintext: parameters + parameters, transportError: 0x08),
            BadQMuxClient(
                testDescription: "a prohibited ACK frame",
                plaintext: parameters + [0x05, 0x02, 0x00, 0x00, 0x00, 0x00], transportError: 0x07),
            BadQMuxClient(
                testDescription: "a truncated record",
                plaintext: parameters + [0x03, 0x11, 0x00, 0x40], transportError: 0x07),
            BadQMuxClient(
                testDescription: "an empty record",
                plaintext: parameters + [0x00], transportError: 0x0a),
            BadQMuxClient(
                testDescription: "garbage (record Size 2^62-1)",
                plaintext: [UInt8](repeating: 0xff, count: 8) + Array("garbage!".utf8), transportError: 0x07),
        ]
    }

    @Test(arguments: BadQMuxClient.all)
    func malformedQMuxAfterTheHandshakeGetsCONNECTION_CLOSEAndTheNextClientIsServed(
        client bad: BadQMuxClient
    )
        async throws
    {
        guard let python = Self.python() else { return }
        let (server, address, relay) = try await Self.tcpServer()
        defer { relay.cancel() }
        let result = try await runProgram(
            python,
            [
                "\(Self.peers)/tls_misconfigured_server.py", "--connect", "\(address.port)", "--ca", Fixtures.ca,
                "--server-name", "localhost", "--send-hex", bad.plaintext.map { String(format: "%02x", $0) }.joined(),
            ])
        let report = jsonObject(result.stdout)
        #expect(report?["ok"] as? Bool == true, "\(result.stdout) \(result.stderr)")
        #expect(report?["closed_by_server"] as? Bool == true, "the server hung up: \(result.stdout)")
        let received = Self.bytes(hex: report?["received"] as? String ?? "")
        #expect(Self.connectionCloseCode(in: received) == bad.transportError, "\(result.stdout)")
        try await Self.expectNoConnectionsLeft(server)
        try await Self.expectGoodConnection(TCPFallbackTests.client(.tcpOnly), to: address)
        await server.shutdown()
    }

    @Test func ourClientWithAnotherALPNIsRefusedByOurServerOverTCP() async throws {
        let (server, address, relay) = try await Self.tcpServer()
        defer { relay.cancel() }
        let client = TransportClient(
            configuration: ClientConfiguration(
                serverName: "localhost", alpn: "other/9", trust: .caFile(Fixtures.ca), handshakeTimeout: .seconds(5),
                fallback: .tcpOnly))
        let failure = try await withTimeout { await Self.firstFailure(client, address) }
        #expect(failure?.code == .alpnMismatch, "\(failure.map { "\($0)" } ?? "connected")")
        try await Self.expectNoConnectionsLeft(server)
        try await Self.expectGoodConnection(TCPFallbackTests.client(.tcpOnly), to: address)
        await server.shutdown()
    }

    // MARK: - Helpers

    /// Starts the Python peer `arguments` on TCP, connects a `policy` client until it fails, hands the failure (one is
    /// required: a connection is `accepted`) and the peer to `check`, then checks a good relay still connects.
    static func firstFailure(
        against arguments: [String], policy: FallbackPolicy, accepted: String,
        _ check: (TransportError, ChildServer) async throws -> Void
    ) async throws {
        guard let python = python() else { return }
        let (peer, heldUDP) = try await startTCPPeer(python, arguments)
        defer {
            peer.kill()
            close(heldUDP)
        }
        let address = try #require(ServerAddress(peer.address))
        let client = TCPFallbackTests.client(policy)
        let failure = try await withTimeout { await firstFailure(client, address) }
        try await check(try #require(failure, "\(accepted) was accepted"), peer)
        try await expectGoodConnection(client)
    }

    /// Starts a TCP-only Python peer whose port is held on UDP too: the race policy also tries QUIC on the same port
    /// number, and another test's relay that happens to have it on UDP would answer (seen: the race connected over
    /// QUIC). A port already taken on UDP: the peer is started again, up to 5 times.
    static func startTCPPeer(
        _ python: String, _ arguments: [String]
    ) async throws -> (peer: ChildServer, heldUDP: Int32) {
        for _ in 0..<5 {
            let peer = try await ChildServer.start(python, arguments)
            let port = try #require(ServerAddress(peer.address)).port
            if let held = holdUDP(port) { return (peer, held) }
            peer.kill()
        }
        throw TransportError(.systemCallFailed, "no port free on both TCP and UDP in 5 tries")
    }

    /// A UDP socket bound to `host`:`port` (127.0.0.1 by default), keeping every other socket off it and answering
    /// nothing; nil when the port is taken.
    static func holdUDP(_ port: UInt16, host: String = "127.0.0.1") -> Int32? {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        if SocketAddress(host: host, port: port)!.withSockAddr({ bind(fd, $0, $1) }) != 0 {
            close(fd)
            return nil
        }
        return fd
    }

    /// An echo relay on TCP only; a 3 s handshake timeout ends connections that stall mid-handshake.
    static func tcpServer() async throws -> (TransportServer, ServerAddress, Task<Void, Never>) {
        var configuration = Fixtures.serverConfiguration()
        configuration.quic = nil
        configuration.tcp = "127.0.0.1:0"
        configuration.handshakeTimeout = .seconds(3)
        let server = try await TransportServer.bind(configuration: configuration)
        let relay = Task { await EchoRelay.run(server) }
        return (server, server.tcpAddress!, relay)
    }

    /// Connects and echoes one message; the `TransportError` that stopped it, nil when everything worked. A peer
    /// that breaks QMux after its transport parameters fails the connect or the first stream operation.
    static func firstFailure(_ client: TransportClient, _ address: ServerAddress) async -> TransportError? {
        do {
            let connection = try await client.connect(to: address)
            #expect(connection.path == .tcp, "nothing but TCP can reach this server")
            do {
                try await echoOnce(connection)
            } catch {
                await connection.close()
                throw error
            }
            await connection.close()
            return nil
        } catch let error as TransportError {
            return error
        } catch {
            Issue.record("not a TransportError: \(error)")
            return nil
        }
    }

    static func echoOnce(_ connection: TransportConnection) async throws {
        let stream = try await connection.openStream()
        try await stream.send(Array("hello".utf8))
        try await stream.finish()
        var received: [[UInt8]] = []
        for try await message in stream.messages { received.append(message.bytes) }
        #expect(received == [Array("hello".utf8)])
    }

    /// The same client connects to a good server and echoes a message (over TCP: the server has no QUIC).
    static func expectGoodConnection(_ client: TransportClient, to existing: ServerAddress? = nil) async throws {
        var server: TransportServer?
        var relay: Task<Void, Never>?
        var address = existing
        if address == nil {
            let (good, goodAddress, goodRelay) = try await TCPFallbackTests.dualServer(tcpOnly: true)
            (server, address, relay) = (good, goodAddress, goodRelay)
        }
        defer { relay?.cancel() }
        try await withTimeout { [address] in
            let connection = try await client.connect(to: address!)
            #expect(connection.path == .tcp)
            try await echoOnce(connection)
            await connection.close()
        }
        await server?.shutdown()
    }

    static func bytes(hex: String) -> [UInt8] {
        let digits = Array(hex.utf8)
        return stride(from: 0, to: digits.count - 1, by: 2).compactMap {
            UInt8(String(decoding: digits[$0...$0 + 1], as: UTF8.self), radix: 16)
        }
    }

    /// The error code of the transport CONNECTION_CLOSE (0x1c) opening one of the QMux records in `plaintext`.
    static func connectionCloseCode(in plaintext: [UInt8]) -> UInt64? {
        func varint(_ index: inout Int) -> UInt64? {
            guard index < plaintext.count else { return nil }
            let length = 1 << (plaintext[index] >> 6)
            guard index + length <= plaintext.count else { return nil }
            var value = UInt64(plaintext[index] & 0x3f)
            for byte in plaintext[(index + 1)..<(index + length)] { value = value << 8 | UInt64(byte) }
            index += length
            return value
        }
        var index = 0
        while let size = varint(&index) {
            var frame = index
            if varint(&frame) == 0x1c { return varint(&frame) }
            index += Int(clamping: size)
        }
        return nil
    }

    /// The server forgot every connection that failed (bounded wait: a failed one is torn down asynchronously).
    static func expectNoConnectionsLeft(_ server: TransportServer) async throws {
        var count = await server.connectionCount()
        for _ in 0..<500 where count > 0 {
            try await Task.sleep(for: .milliseconds(20))
            count = await server.connectionCount()
        }
        #expect(count == 0, "\(count) failed connections still held by the server")
    }
}

/// A plain TCP client for bad input. Its blocking calls run on a thread of its own, off the cooperative pool.
enum RawTCP {
    enum End: Sendable, Equatable {
        /// The server closed or reset the connection.
        case closedByServer
        /// Nothing happened for the whole wait.
        case stillOpen
        case connectFailed
    }

    struct Outcome: Sendable {
        var received: [UInt8]
        var end: End
    }

    /// Connects to 127.0.0.1:`port`, sends `bytes` (then FIN if `halfClose`) and reads until the server ends the
    /// connection or nothing came for `wait` seconds.
    static func exchange(port: UInt16, sending bytes: [UInt8], halfClose: Bool, wait: Int = 15) async -> Outcome {
        await withCheckedContinuation { continuation in
            Thread {
                continuation.resume(returning: blocking(port: port, bytes: bytes, halfClose: halfClose, wait: wait))
            }.start()
        }
    }

    private static func blocking(port: UInt16, bytes: [UInt8], halfClose: Bool, wait: Int) -> Outcome {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return Outcome(received: [], end: .connectFailed) }
        defer { close(fd) }
        var timeout = timeval(tv_sec: wait, tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let connected = SocketAddress(host: "127.0.0.1", port: port)!.withSockAddr { connect(fd, $0, $1) }
        guard connected == 0 else { return Outcome(received: [], end: .connectFailed) }
        var offset = 0
        while offset < bytes.count {
            // MSG_NOSIGNAL: the server may hang up before reading everything; that must not raise SIGPIPE here.
            let sent = bytes.withUnsafeBytes {
                send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL))
            }
            if sent <= 0 { break }
            offset += sent
        }
        if halfClose { _ = shutdown(fd, Int32(SHUT_WR)) }
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = recv(fd, &buffer, buffer.count, 0)
            if count > 0 {
                received += buffer[..<count]
            } else if count == 0 || errno == ECONNRESET {
                return Outcome(received: received, end: .closedByServer)
            } else if errno != EINTR {
                return Outcome(received: received, end: .stillOpen)
            }
        }
    }
}
