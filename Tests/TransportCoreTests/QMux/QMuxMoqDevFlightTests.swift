import TestSupport
import Testing

@testable import TransportCore

/// moq-dev's QMux (moq-ffi 0.4.18, its `qmux` crate) as a server of ours reads it: the bytes its client sent on a
/// `tcp://` connection, recorded on the wire by Tests/Peers/moq_qmux_peer.py's bridge, fed to our server with no
/// process and no clock. The interop matrix (`QMuxInteropMatrixTests`) runs the live exchange; this keeps the
/// parsing part of it in the unit layer.
@Suite("QMux: moq-dev's client flight")
struct QMuxMoqDevFlightTests {
    /// Three records: QX_TRANSPORT_PARAMETERS (nine parameters and the extension `application_protocols`,
    /// 0x3d4f9c2a8b1e6075, listing 14 MoQ versions); STREAM on stream 0 with an explicit offset 0 and 61 bytes (a
    /// moq-transport CLIENT_SETUP); RESET_STREAM (code 1, final size 61) and STOP_SENDING (code 0) on stream 0.
    static let flight = hexBytes(
        "40c5ff5153300d0a0d0a40bb010480007530040480100000050480040000060480040000070480040000080240640902406420027ffe"
            + "c571c59429cd0845027ffefd4f9c2a8b1e6075407c0b6d6f712d6c6974652d30360b6d6f712d6c6974652d30350b6d6f712d6c"
            + "6974652d30340b6d6f712d6c6974652d3033046d6f716c076d6f71742d3232076d6f71742d3231076d6f71742d3230076d6f71"
            + "742d3139076d6f71742d3138076d6f71742d3137076d6f71742d3136076d6f71742d3135066d6f712d303040410e00003d2000"
            + "3a03c0000000ff0dad02c0000000ff0dad01c0000000ff00000e0480040b5a0180040b5c0102c0000000ffffffff070b6d6f71"
            + "2d6c6974652d7273040400013d03050000")

    static func hexBytes(_ hex: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            bytes.append(UInt8(hex[index..<next], radix: 16)!)
            index = next
        }
        return bytes
    }

    /// Our server takes the flight whole and in one-byte pieces alike: their parameters (the extension one
    /// ignored, §5.1), stream 0's bytes, their reset and STOP_SENDING, answered with our RESET_STREAM, no error.
    @Test(arguments: [false, true])
    func ourServerReadsTheirFlight(oneByteAtATime: Bool) throws {
        let server = QMuxConnection(role: .server, localParameters: qmuxTestParameters(), now: 0)
        _ = server.takeOutput(now: 0)
        if oneByteAtATime {
            for byte in Self.flight { try server.receive([byte], now: 0) }
        } else {
            try server.receive(Self.flight, now: 0)
        }
        var events: [QMuxEvent] = []
        while let event = server.nextEvent() { events.append(event) }

        let theirs = QMuxTransportParameters(
            maxIdleTimeout: 30_000, initialMaxData: 1_048_576, initialMaxStreamDataBidiLocal: 262_144,
            initialMaxStreamDataBidiRemote: 262_144, initialMaxStreamDataUni: 262_144, initialMaxStreamsBidi: 100,
            initialMaxStreamsUni: 100, maxDatagramFrameSize: 16_382, maxRecordSize: 16_382)
        #expect(events.first == .peerParameters(theirs))
        let data = events.compactMap { event -> [UInt8]? in
            if case .streamData(0, let bytes, fin: false) = event { return bytes }
            return nil
        }
        #expect(data.flatMap { $0 }.count == 61)
        #expect(data.flatMap { $0 }.prefix(3) == [0x20, 0x00, 0x3a])  // CLIENT_SETUP, length 58
        #expect(events.contains(.streamReset(0, code: 1)))
        #expect(events.contains(.stopSending(0, code: 0)))
        #expect(!events.contains { if case .closed = $0 { true } else { false } }, "\(events)")
        #expect(!server.isClosed)
        // STOP_SENDING is answered with RESET_STREAM carrying its code (RFC 9000 §3.5), nothing sent on it yet.
        let answer = try qmuxParseRecords(server.takeOutput(now: 0))
        #expect(answer.contains(.resetStream(streamID: 0, errorCode: 0, finalSize: 0)), "\(answer)")
    }
}
