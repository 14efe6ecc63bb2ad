import ChildProcesses
import Foundation
import Glibc
import PTTTalkGroups
import PTTTransport
import TestSupport
import Testing
import TransportCore

/// Wireshark's command-line tools, when installed (`.ci/setup` installs the Debian package `tshark`) and this
/// process may capture (root).
enum Wireshark {
    static let tshark = "/usr/bin/tshark"
    static let dumpcap = "/usr/bin/dumpcap"
    static let installed =
        FileManager.default.isExecutableFile(atPath: tshark) && FileManager.default.isExecutableFile(atPath: dumpcap)
        && geteuid() == 0
    /// Skipped without the tools unless PTT_REQUIRE_PEERS is set; then the tests run and fail.
    static let enabled = installed || ProcessInfo.processInfo.environment["PTT_REQUIRE_PEERS"] != nil

    /// `tshark -r capture ... -T fields -e field...`, one array of columns per packet. `keyLog` nil: no key log.
    static func fields(
        _ capture: String, keyLog: String?, decodeAs: String, filter: String, _ fields: [String]
    ) async throws -> [[String]] {
        guard installed else { throw TransportError(.invalidConfiguration, "tshark/dumpcap missing or not root") }
        var arguments = ["-n", "-r", capture, "-o", "tls.keylog_file:\(keyLog ?? "")", "-d", decodeAs, "-Y", filter]
        arguments += ["-T", "fields"] + fields.flatMap { ["-e", $0] }
        let result = try await runProgram(tshark, arguments, timeout: 60)
        #expect(result.status == 0, "tshark failed: \(result.stderr)")
        return result.stdout.split(separator: "\n").map { line in
            line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
        }
    }
}

/// What one captured session sent, and the files that describe it.
struct CapturedSession {
    let directory: String
    let capture: String
    let clientKeyLog: String
    let serverKeyLog: String
    let port: UInt16
    let message: [UInt8]
    let datagram: [UInt8]

    /// An echo relay and a client, both logging keys, exchange one stream message and one datagram over `path`
    /// while dumpcap captures the relay's port on loopback. A QUIC capture that holds fewer of the relay's
    /// datagrams than the client had received before it closed lost packets to a starved dumpcap (seen once at
    /// load 13: no STREAM frame in the file, the later DATAGRAM there): the session is recorded again, up to three
    /// times, and the last one is judged whatever it holds.
    static func record(over path: TransportPath) async throws -> CapturedSession {
        var attempt = 1
        while true {
            let (session, received) = try await recordOnce(over: path)
            let captured = try await Wireshark.fields(
                session.capture, keyLog: nil, decodeAs: "udp.port==\(session.port),quic",
                filter: "udp.srcport==\(session.port)", ["frame.number"]
            ).count
            if path == .tcp || captured >= received || attempt == 3 { return session }
            print("capture \(attempt) holds \(captured) of the relay's \(received) datagrams: recorded again")
            session.remove()
            attempt += 1
        }
    }

    /// One recorded session, and how many UDP datagrams the client had received from the relay before it closed.
    private static func recordOnce(over path: TransportPath) async throws -> (CapturedSession, received: Int) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ptt-keylog-\(UUID())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var server = Fixtures.serverConfiguration()
        if path == .tcp {
            server.quic = nil
            server.tcp = "127.0.0.1:0"
        }
        server.keyLogFile = "\(directory)/server.keys"
        let relay = try await TransportServer.bind(configuration: server)
        let echo = Task { await EchoRelay.run(relay) }
        defer { echo.cancel() }
        let address = (relay.quicAddress ?? relay.tcpAddress)!
        let capture = try await PacketCapture.start(
            dumpcap: Wireshark.dumpcap, port: address.port, file: "\(directory)/session.pcapng")
        var client = ClientConfiguration(
            serverName: "localhost", trust: .caFile(Fixtures.ca), handshakeTimeout: .seconds(5),
            fallback: path == .tcp ? .tcpOnly : .quicOnly)
        client.keyLogFile = "\(directory)/client.keys"
        let transport = TransportClient(configuration: client)
        let message = Array("keylog probe message \(UUID())".utf8)
        let datagram = Array("keylog probe datagram \(UUID())".utf8)
        let received: Int
        do {
            received = try await withTimeout {
                let connection = try await transport.connect(to: address)
                let stream = try await connection.openStream()
                try await stream.send(message)
                #expect(try await stream.nextMessage()?.bytes == message)
                try connection.sendDatagram(datagram)
                var datagrams = connection.datagrams.makeAsyncIterator()
                #expect(await datagrams.next()?.payload == datagram)
                let received = Int(await connection.statistics().packetsReceived)
                await connection.close()
                return received
            }
        } catch {
            await capture.stop()
            throw error
        }
        let stopped = await capture.finish()  // before the relay closes its port: the marker goes to our relay
        await relay.shutdown()
        #expect(stopped.status == 0, "dumpcap: \(stopped.output)")
        let session = CapturedSession(
            directory: directory, capture: capture.file, clientKeyLog: client.keyLogFile!,
            serverKeyLog: server.keyLogFile!, port: address.port, message: message, datagram: datagram)
        return (session, received)
    }

    func remove() { try? FileManager.default.removeItem(atPath: directory) }
}

extension Array where Element == UInt8 {
    var hex: String { map { String(format: "%02x", $0) }.joined() }
}

@Suite(
    "Key logs decrypt captured sessions (tshark)", .serialized,
    .enabled(if: Wireshark.enabled, "tshark/dumpcap missing or not root; .ci/setup installs the package tshark"),
    .integration)
struct KeyLogCaptureTests {
    /// Frame types and payloads tshark finds in the QUIC packets it could decrypt.
    private func quicContents(
        _ session: CapturedSession, keyLog: String?
    ) async throws
        -> (types: Set<Int>, streamData: String, datagrams: String)
    {
        let rows = try await Wireshark.fields(
            session.capture, keyLog: keyLog, decodeAs: "udp.port==\(session.port),quic", filter: "quic",
            ["quic.frame_type", "quic.stream_data", "quic.dg"])
        var types = Set<Int>()
        var streamData = ""
        var datagrams = ""
        for row in rows where row.count == 3 {
            for type in row[0].split(separator: ",") { if let value = Int(type) { types.insert(value) } }
            streamData += row[1].replacingOccurrences(of: ",", with: "")
            datagrams += row[2].replacingOccurrences(of: ",", with: "")
        }
        return (types, streamData, datagrams)
    }

    @Test func quicSessionDecryptsWithEitherSidesKeyLog() async throws {
        let session = try await CapturedSession.record(over: .quic)
        defer { session.remove() }
        let stream = Set(0x08...0x0f)
        let datagram: Set<Int> = [0x30, 0x31]
        for keyLog in [session.clientKeyLog, session.serverKeyLog] {
            let lines = try String(contentsOfFile: keyLog, encoding: .utf8).split(separator: "\n")
            #expect(lines.contains { $0.hasPrefix("CLIENT_TRAFFIC_SECRET_0 ") }, "\(keyLog)")
            let decrypted = try await quicContents(session, keyLog: keyLog)
            #expect(!decrypted.types.isDisjoint(with: stream), "no STREAM frame decrypted with \(keyLog)")
            #expect(!decrypted.types.isDisjoint(with: datagram), "no DATAGRAM frame decrypted with \(keyLog)")
            #expect(decrypted.streamData.contains(MessageFraming.frame(session.message).hex))
            #expect(decrypted.datagrams.contains(session.datagram.hex))
        }
        // Without the key log only the Initial packets decrypt (their keys derive from the connection ID).
        let opaque = try await quicContents(session, keyLog: nil)
        #expect(opaque.types.isDisjoint(with: stream.union(datagram)))
        #expect(!opaque.streamData.contains(MessageFraming.frame(session.message).hex))
        #expect(!opaque.datagrams.contains(session.datagram.hex))
    }

    @Test func tcpSessionDecryptsWithEitherSidesKeyLog() async throws {
        let session = try await CapturedSession.record(over: .tcp)
        defer { session.remove() }
        func plaintext(_ keyLog: String?) async throws -> String {
            try await Wireshark.fields(
                session.capture, keyLog: keyLog, decodeAs: "tcp.port==\(session.port),tls", filter: "tls",
                ["data.data"]
            ).map { $0.joined().replacingOccurrences(of: ",", with: "") }.joined()
        }
        // QX_TRANSPORT_PARAMETERS, the first QMux frame each side sends, has the 8-byte type ff5153300d0a0d0a.
        let transportParameters = "ff5153300d0a0d0a"
        for keyLog in [session.clientKeyLog, session.serverKeyLog] {
            let decrypted = try await plaintext(keyLog)
            #expect(decrypted.contains(transportParameters), "no QMux record decrypted with \(keyLog)")
            #expect(decrypted.contains(MessageFraming.frame(session.message).hex))
            #expect(decrypted.contains(session.datagram.hex))
        }
        let opaque = try await plaintext(nil)
        #expect(!opaque.contains(transportParameters))
        #expect(!opaque.contains(MessageFraming.frame(session.message).hex))
        #expect(!opaque.contains(session.datagram.hex))
    }
}
