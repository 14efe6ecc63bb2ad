import TestSupport
import Testing

@testable import TransportCore

/// One-byte STREAM frames (issue 21, item 11): contiguous frames of one stream become one `.streamData` event, so a
/// peer cannot turn each byte it sends into an allocation of its own on the way to the application.
@Suite("QMux stream data: contiguous frames are joined")
struct QMuxCoalescingTests {
    static func server() throws -> QMuxConnection {
        let connection = QMuxConnection(role: .server, localParameters: qmuxTestParameters(), now: 1)
        _ = connection.takeOutput()
        try connection.receive(qmuxRecord([.transportParameters(qmuxTestParameters())]), now: 1)
        while connection.nextEvent() != nil {}
        return connection
    }

    static func events(_ connection: QMuxConnection) -> [QMuxEvent] {
        var events: [QMuxEvent] = []
        while let event = connection.nextEvent() { events.append(event) }
        return events
    }

    @Test func oneByteFramesOfAStreamArriveAsOneEvent() throws {
        let server = try Self.server()
        let frames = (0..<2000).map {
            QMuxFrame.stream(streamID: 0, offset: UInt64($0), data: [UInt8($0 % 251)], fin: false)
        }
        try server.receive(qmuxRecord(Array(frames[..<1000])) + qmuxRecord(Array(frames[1000...])), now: 2)
        let events = Self.events(server)
        let data = events.compactMap { if case .streamData(0, let bytes, _) = $0 { bytes } else { nil } }
        #expect(data.count == 1, "\(data.count) events for 2000 one-byte frames")
        #expect(data.joined().elementsEqual((0..<2000).map { UInt8($0 % 251) }))
    }

    @Test func interleavedStreamsAndFINKeepTheirOrder() throws {
        let server = try Self.server()
        try server.receive(
            qmuxRecord([
                .stream(streamID: 0, offset: 0, data: [1], fin: false),
                .stream(streamID: 0, offset: 1, data: [2], fin: false),
                .stream(streamID: 4, offset: 0, data: [9], fin: false),
                .stream(streamID: 0, offset: 2, data: [3], fin: true),
                .stream(streamID: 4, offset: 1, data: [8], fin: true),
            ]), now: 2)
        let data = Self.events(server).compactMap { event -> String? in
            guard case .streamData(let id, let bytes, let fin) = event else { return nil }
            return "\(id):\(bytes)\(fin ? " fin" : "")"
        }
        #expect(data == ["0:[1, 2]", "4:[9]", "0:[3] fin", "4:[8] fin"])
    }
}
