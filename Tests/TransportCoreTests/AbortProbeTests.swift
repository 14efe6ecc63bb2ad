import Foundation
import Testing

@testable import TransportCore

/// True in the child process `AbortProbeParentTests` (in PTTIntegrationTests) starts.
let inAbortProbeChild = ProcessInfo.processInfo.environment["PTT_ABORT_PROBES"] == "1"

/// Each probe drives, on the virtual network, one condition under which ngtcp2 0.12.1 aborts the process when the
/// caller does not guard against it (its assertions are compiled into Debian's build). The probes run only in a
/// child copy of this test binary (`AbortProbeParentTests`), so that a regression is reported as a failed test
/// with the library's assertion message instead of killing the test runner.
@Suite("ngtcp2 0.12.1 abort probes (child process only)", .enabled(if: inAbortProbeChild))
struct AbortProbes {
    /// The peer's flow control blocks a stream while DATAGRAM frames keep coming: every packet is written with
    /// `NGTCP2_WRITE_*_FLAG_MORE` (datagram first, then stream data) and every stream write is refused as
    /// blocked. Reads and timers must never find a packet left pending (0.12.1 asserts on a stale one).
    @Test func flowControlBlockedStreamWithDatagrams() throws {
        var small = QUICParameters()
        small.initialMaxStreamData = 4096
        let net = try VirtualNetwork(parameters: small)
        net.installEcho()
        try net.addClient(parameters: small)  // the client never extends credit: the server's echo blocks
        #expect(net.run { net.clientHandshakeCompleted() })
        let stream = try #require(try net.client.openBidirectionalStream())
        try net.client.write(stream: stream, [UInt8](repeating: 0x55, count: 64 * 1024), fin: false)
        for round in 0..<40 {
            try net.client.sendDatagram([UInt8](repeating: UInt8(round), count: 100))
            net.run(for: 50 * nanosecondsPerMillisecond)
        }
        #expect(net.clientStreamData(stream).bytes.count == 4096)  // exactly the client's window came back
        #expect(net.clientDatagrams().count == 40)  // audio kept flowing past the blocked stream
        #expect(net.clientCloseReason() == nil)
        #expect(net.serverCloseReasons().isEmpty)
    }

    /// Zero-length writes without FIN: never handed to ngtcp2 (a lost 0-length STREAM frame trips assertions in
    /// 0.12.1's retransmission code); a 0-length write with FIN is a plain FIN.
    @Test func zeroLengthStreamWrites() throws {
        let net = try VirtualNetwork()
        net.installEcho()
        net.drop = { _, index in index % 4 == 3 }  // loss, so retransmission paths run too
        try net.addClient()
        #expect(net.run(for: 10 * nanosecondsPerSecond) { net.clientHandshakeCompleted() })
        let stream = try #require(try net.client.openBidirectionalStream())
        for _ in 0..<20 { try net.client.write(stream: stream, [], fin: false) }
        try net.client.write(stream: stream, Array("after empty writes".utf8), fin: false)
        for _ in 0..<20 { try net.client.write(stream: stream, [], fin: false) }
        try net.client.write(stream: stream, [], fin: true)
        #expect(net.run(for: 20 * nanosecondsPerSecond) { net.clientStreamData(stream).fin })
        #expect(net.clientStreamData(stream).bytes == Array("after empty writes".utf8))
    }

    /// An empty DATAGRAM is refused by the API with a typed error (0.12.1 asserts on a 0-length DATAGRAM frame).
    @Test func zeroLengthDatagram() throws {
        let net = try VirtualNetwork()
        net.installEcho()
        try net.addClient()
        #expect(net.run { net.clientHandshakeCompleted() })
        #expect(throws: TransportError.self) { try net.client.sendDatagram([]) }
        try net.client.sendDatagram([1])
        #expect(net.run { net.clientDatagrams() == [[1]] })
    }

    /// An application close before the handshake completed goes out as a transport close (APPLICATION_ERROR),
    /// never through ngtcp2's application-close writer (which asserts between "TLS finished" and
    /// "handshake complete" on a server).
    @Test func applicationCloseDuringTheHandshake() throws {
        let net = try VirtualNetwork()
        try net.addClient()
        #expect(net.run { !net.serverConnections.isEmpty })  // the server holds the connection mid-handshake
        let server = try #require(net.serverConnections.first)
        #expect(!server.isHandshakeCompleted)
        server.close(code: 7, reason: "shutting down", now: net.now)
        #expect(net.run { net.clientCloseReason() != nil })
        guard case .failed(let error) = net.clientCloseReason() else {
            Issue.record("client saw \(String(describing: net.clientCloseReason()))")
            return
        }
        #expect(error.transportErrorCode == 0x0c)
    }
}
