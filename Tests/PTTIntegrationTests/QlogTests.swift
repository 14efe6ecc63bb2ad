import Foundation
import PTTTalkGroups
import PTTTransport
import TestSupport
import Testing

/// qlog files written by real connections over loopback, read back as JSON-SEQ.
@Suite("qlog per QUIC connection", .integration)
struct QlogTests {
    /// The JSON records of a JSON-SEQ file (each record starts with 0x1E), or nil while one does not parse yet.
    static func records(_ path: String) -> [[String: Any]]? {
        guard let data = FileManager.default.contents(atPath: path), !data.isEmpty, data.first == 0x1e else {
            return nil
        }
        var records: [[String: Any]] = []
        for chunk in data.split(separator: 0x1e) where !chunk.allSatisfy({ $0 == 0x0a || $0 == 0x20 }) {
            guard let object = try? JSONSerialization.jsonObject(with: Data(chunk)) as? [String: Any] else {
                return nil
            }
            records.append(object)
        }
        return records
    }

    /// Waits (bounded) until every file in `directory` ending in `suffix` parses, and returns them by name.
    static func parsedFiles(in directory: String, suffix: String, count: Int) async throws -> [String: [[String: Any]]]
    {
        var parsed: [String: [[String: Any]]] = [:]
        for _ in 0..<250 {
            let names = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(suffix) }
            parsed = [:]
            for name in names { if let records = records("\(directory)/\(name)") { parsed[name] = records } }
            if names.count == count && parsed.count == count { return parsed }
            try await Task.sleep(for: .milliseconds(20))
        }
        return parsed
    }

    /// Binding and connecting with qlog on fail with `refusal`, a typed configuration error naming the CVE.
    static func expectRefused(server: ServerConfiguration, clientDirectory: String, refusal: String) async throws {
        #expect(refusal.contains("CVE-2026-40170"))
        let bindError = await #expect(throws: TransportError.self) {
            _ = try await TransportServer.bind(configuration: server)
        }
        #expect(bindError?.code == .invalidConfiguration)
        #expect(bindError?.message == refusal)
        var client = ClientConfiguration(serverName: "localhost", trust: .caFile(Fixtures.ca), fallback: .quicOnly)
        client.qlogDirectory = clientDirectory
        let connectError = await #expect(throws: TransportError.self) {
            _ = try await TransportClient(configuration: client).connect(to: ServerAddress(host: "127.0.0.1", port: 9))
        }
        #expect(connectError?.message == refusal)
    }

    @Test func clientAndServerWriteOneFileEachPerConnectionNamedByTheOriginalDCID() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ptt-qlog-\(UUID())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var configuration = Fixtures.serverConfiguration()
        configuration.qlogDirectory = directory
        if let refusal = LinkedLibraries.qlogRefusal {
            // A library not shown to carry the CVE-2026-40170 fix (bookworm-backports' 1.11 in CI): both sides refuse.
            try await Self.expectRefused(server: configuration, clientDirectory: directory, refusal: refusal)
            return
        }
        let server = try await TransportServer.bind(configuration: configuration)
        let relay = Task { await EchoRelay.run(server) }
        defer { relay.cancel() }
        var clientConfiguration = ClientConfiguration(
            serverName: "localhost", trust: .caFile(Fixtures.ca), fallback: .quicOnly)
        clientConfiguration.qlogDirectory = directory
        let client = TransportClient(configuration: clientConfiguration)
        let connections = 2
        try await withTimeout {
            for _ in 0..<connections {
                let connection = try await client.connect(to: server.quicAddress!)
                let stream = try await connection.openStream()
                try await stream.send(Array("qlog".utf8))
                _ = try await stream.nextMessage()
                await connection.close()
            }
        }
        await server.shutdown()

        let clientFiles = try await Self.parsedFiles(in: directory, suffix: "_client.sqlog", count: connections)
        let serverFiles = try await Self.parsedFiles(in: directory, suffix: "_server.sqlog", count: connections)
        #expect(clientFiles.count == connections)
        #expect(serverFiles.count == connections)
        let clientIDs = Set(clientFiles.keys.map { $0.dropLast("_client.sqlog".count) })
        let serverIDs = Set(serverFiles.keys.map { $0.dropLast("_server.sqlog".count) })
        #expect(clientIDs == serverIDs, "both sides name a connection by the DCID of the client's first Initial")
        for (name, records) in clientFiles.merging(serverFiles, uniquingKeysWith: { first, _ in first }) {
            let header = try #require(records.first)
            #expect(header["qlog_format"] as? String == "JSON-SEQ", "\(name)")
            let trace = header["trace"] as? [String: Any]
            let groupID = (trace?["common_fields"] as? [String: Any])?["group_id"] as? String
            #expect(name.hasPrefix(try #require(groupID)), "the file is named by the ODCID qlog records")
            let vantage = (trace?["vantage_point"] as? [String: Any])?["type"] as? String
            #expect(name.hasSuffix("_\(try #require(vantage)).sqlog"))
            let events = Set(records.dropFirst().compactMap { $0["name"] as? String })
            #expect(events.contains("transport:packet_sent"), "\(name)")
            #expect(events.contains("transport:packet_received"), "\(name)")
        }
    }
}
