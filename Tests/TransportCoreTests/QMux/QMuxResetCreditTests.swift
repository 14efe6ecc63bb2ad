import TestSupport
import Testing

@testable import TransportCore

/// Connection-level credit of streams whose receiving part ends early (RFC 9000 §4.5, §3.2; QMux §4): the bytes a
/// reset or stopped stream will never have consumed return their MAX_DATA credit at once, whatever the peer sends
/// next, so a reset stream never starves the connection. A server fed hand-made records, as a client (honest or
/// not) sends them; nothing is consumed unless the test says so.
@Suite("QMux: reset and stopped streams give their connection credit back")
struct QMuxResetCreditTests {
    /// 10,000 bytes for the connection, 8,000 per stream: two streams' unread bytes use most of the connection.
    static let parameters = QMuxTransportParameters(
        initialMaxData: 10_000, initialMaxStreamDataBidiLocal: 8_000, initialMaxStreamDataBidiRemote: 8_000,
        initialMaxStreamsBidi: 10)

    /// A server connection that has the client's parameters; its own first output is taken.
    static func server() throws -> QMuxConnection {
        let server = QMuxConnection(role: .server, localParameters: parameters, now: 1)
        _ = server.takeOutput()
        try server.receive(qmuxRecord([.transportParameters(qmuxTestParameters())]), now: 1)
        return server
    }

    static func drain(_ server: QMuxConnection) -> [QMuxEvent] {
        var events: [QMuxEvent] = []
        while let event = server.nextEvent() { events.append(event) }
        return events
    }

    /// The MAX_DATA limits the server sent since the last call.
    static func maxData(_ server: QMuxConnection) throws -> [UInt64] {
        try qmuxParseRecords(server.takeOutput()).compactMap { if case .maxData(let limit) = $0 { limit } else { nil } }
    }

    static func data(_ stream: UInt64, at offset: UInt64 = 0, _ count: Int, fin: Bool = false) -> [UInt8] {
        qmuxRecord([.stream(streamID: stream, offset: offset, data: Array(repeating: 0x61, count: count), fin: fin)])
    }

    @Test func aResetWithUnreadDataReturnsItsConnectionCredit() throws {
        let server = try Self.server()
        try server.receive(Self.data(0, 3_000), now: 2)
        try server.receive(Self.data(4, 5_000), now: 2)
        #expect(Self.drain(server).contains(.streamData(0, Array(repeating: 0x61, count: 3_000), fin: false)))
        #expect(try Self.maxData(server).isEmpty, "nothing consumed, nothing to return yet")

        // RESET_STREAM with 1,000 more bytes than arrived: all 4,000 bytes of stream 0 come back.
        try server.receive(qmuxRecord([.resetStream(streamID: 0, errorCode: 9, finalSize: 4_000)]), now: 3)
        #expect(Self.drain(server).contains(.streamReset(0, code: 9)))
        #expect(server.receivedData == 9_000)
        #expect(server.consumedData == 4_000, "the reset stream's unread 3,000 bytes and its 1,000 unsent ones")

        // Reading the reset stream's bytes afterwards counts nothing twice; stream 4's reads count as usual.
        server.consumed(stream: 0, bytes: 3_000)
        #expect(server.consumedData == 4_000)
        server.consumed(stream: 4, bytes: 5_000)
        #expect(server.consumedData == 9_000)
        server.consumed(stream: 4, bytes: 1)
        #expect(server.consumedData == 9_000, "no more than was delivered")
        #expect(try Self.maxData(server) == [19_000])

        // The connection's whole window is usable again: a fresh stream takes 8,000 bytes without error (16,000
        // would be the limit had the reset stream kept its 3,000 bytes).
        try server.receive(Self.data(8, 8_000), now: 4)
        #expect(!server.isClosed)
    }

    @Test func stopSendingReturnsUnreadBytesAndEveryByteThatStillArrives() throws {
        let server = try Self.server()
        try server.receive(Self.data(0, 3_000), now: 2)
        _ = Self.drain(server)
        server.stopSending(0, code: 5)
        let frames = try qmuxParseRecords(server.takeOutput())
        #expect(frames.contains(.stopSending(streamID: 0, errorCode: 5)))
        #expect(server.consumedData == 3_000, "the 3,000 bytes delivered and never to be read")

        // A peer that ignores STOP_SENDING and keeps sending: counted, credited at once, not reported.
        try server.receive(Self.data(0, at: 3_000, 5_000), now: 3)
        #expect(Self.drain(server).isEmpty)
        #expect(server.consumedData == 8_000)
        #expect(try Self.maxData(server) == [18_000])
        try server.receive(Self.data(4, 8_000), now: 4)
        #expect(!server.isClosed, "a fresh stream still has the connection's window")
    }

    /// What `TransportStream.reset` does on QMux: RESET_STREAM and STOP_SENDING, after which the inbox is dropped.
    /// A stream whose data and FIN arrived but were never read gives its bytes back too.
    @Test func aLocalResetReleasesWhatTheApplicationWillNeverRead() throws {
        let server = try Self.server()
        try server.receive(Self.data(0, 2_000), now: 2)
        try server.receive(Self.data(4, 6_000, fin: true), now: 2)
        _ = Self.drain(server)
        for stream: Int64 in [0, 4] {
            server.resetStream(stream, code: 3)
            server.stopSending(stream, code: 3)
        }
        let frames = try qmuxParseRecords(server.takeOutput())
        #expect(frames.contains(.stopSending(streamID: 0, errorCode: 3)))
        #expect(!frames.contains(.stopSending(streamID: 4, errorCode: 3)), "stream 4's receiving part had ended")
        #expect(frames.contains(.maxData(18_000)))
        #expect(server.consumedData == 8_000)
        #expect(server.applicationHeld.isEmpty, "nothing is kept for them")
    }
}
