import Synchronization
import Testing

@testable import TransportCore

/// The core writes no file: TLS secrets go to a `KeyLogWriter` and qlog records to a `QlogSink` given from above.
@Suite("Key log and qlog through sinks (sans-IO)")
struct ObservabilitySinkTests {
    /// Lines a key log writer received, from whichever thread ran the handshake.
    final class Lines: Sendable {
        let lines = Mutex<[String]>([])
        var writer: KeyLogWriter {
            { line in self.lines.withLock { $0.append(String(decoding: line, as: UTF8.self)) } }
        }
    }

    /// What ngtcp2 wrote to one connection's qlog.
    final class RecordedQlog: QlogSink {
        let originalDCID: ConnectionID
        let isClient: Bool
        var bytes: [UInt8] = []
        var finished = false
        var flushes = 0

        init(originalDCID: ConnectionID, isClient: Bool) {
            self.originalDCID = originalDCID
            self.isClient = isClient
        }

        func write(_ chunk: UnsafeRawBufferPointer, fin: Bool) {
            bytes.append(contentsOf: chunk)
            finished = finished || fin
        }

        func flush() { flushes += 1 }
    }

    @Test func bothSidesSecretsGoToTheirWritersInTheKeyLogFormat() throws {
        let clientLines = Lines()
        let serverLines = Lines()
        let server = try TLSServerContext(
            certificateChain: TestCertificates.pem(TestCertificates.serverCert),
            privateKey: TestCertificates.pem(TestCertificates.serverKey), ticketKey: nil, keyLog: serverLines.writer)
        let net = try VirtualNetwork(tls: server)
        let client = try TLSClientContext(
            trust: .certificates(TestCertificates.pem(TestCertificates.ca)), keyLog: clientLines.writer)
        try net.addClient(tls: client)
        #expect(net.run { net.clientHandshakeCompleted() })
        for lines in [clientLines.lines.withLock { $0 }, serverLines.lines.withLock { $0 }] {
            let fields = lines.map { $0.split(separator: " ") }
            #expect(lines.allSatisfy { $0.hasSuffix("\n") }, "one complete line a call")
            #expect(fields.allSatisfy { $0.count == 3 && $0[1].count == 64 }, "LABEL <client random> <secret>")
            #expect(fields.contains { $0[0] == "CLIENT_TRAFFIC_SECRET_0" })
            #expect(Set(fields.map { $0[1] }).count == 1, "one handshake: one client random")
        }
        #expect(clientLines.lines.withLock { $0 }.sorted() == serverLines.lines.withLock { $0 }.sorted())
    }

    @Test func aConnectionsQlogGoesToTheSinkItsFactoryMade() throws {
        var parameters = QUICParameters()
        // Unsafe but single-threaded: the virtual network calls the factory on this test's thread only.
        nonisolated(unsafe) var sinks: [RecordedQlog] = []
        parameters.qlog = { originalDCID, isClient in
            let sink = RecordedQlog(originalDCID: originalDCID, isClient: isClient)
            sinks.append(sink)
            return sink
        }
        var net: VirtualNetwork? = try VirtualNetwork(parameters: parameters)
        try net!.addClient(parameters: parameters)
        #expect(net!.run { net!.clientHandshakeCompleted() })
        let initial = try #require(net!.firstFlight(client: 0).first)
        let firstDCID = ConnectionID(Array(initial[6..<(6 + Int(initial[5]))]))
        net!.client.close(code: 0, reason: "done", now: net!.now)
        net!.run(for: nanosecondsPerSecond)
        #expect(sinks.count == 2 && Set(sinks.map(\.isClient)) == [true, false])
        for sink in sinks {
            #expect(sink.originalDCID == firstDCID, "both sides name the log by the client's first DCID")
            #expect(sink.bytes.first == 0x1e, "JSON-SEQ: every record starts with RS")
            #expect(String(decoding: sink.bytes, as: UTF8.self).contains("\"qlog_format\":\"JSON-SEQ\""))
        }
        #expect(try #require(sinks.first { $0.isClient }).flushes >= 1, "closing flushes the client's log")
        net = nil
        #expect(sinks.allSatisfy { $0.finished }, "freeing a connection finishes its log")
    }
}
