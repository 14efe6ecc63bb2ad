/// QUIC version 1 frames as QMux carries them (draft-ietf-quic-qmux-01 §4), plus the two QMux frames
/// (QX_TRANSPORT_PARAMETERS §4.2, QX_PING §4.3) and DATAGRAM (RFC 9221, permitted by §9.1).
/// Parsing enforces the frame-level rules; the connection enforces the state-dependent ones.
package enum QMuxFrame: Hashable, Sendable {
    /// `count` consecutive PADDING (0x00) bytes, parsed as one frame.
    case padding(count: Int)
    case resetStream(streamID: UInt64, errorCode: UInt64, finalSize: UInt64)
    case stopSending(streamID: UInt64, errorCode: UInt64)
    case stream(streamID: UInt64, offset: UInt64, data: [UInt8], fin: Bool)
    case maxData(UInt64)
    case maxStreamData(streamID: UInt64, maximum: UInt64)
    case maxStreams(bidirectional: Bool, maximum: UInt64)
    case dataBlocked(limit: UInt64)
    case streamDataBlocked(streamID: UInt64, limit: UInt64)
    case streamsBlocked(bidirectional: Bool, limit: UInt64)
    /// CONNECTION_CLOSE: `frameType` non-nil is type 0x1c (transport error), nil is type 0x1d (application).
    case connectionClose(errorCode: UInt64, frameType: UInt64?, reason: String)
    case datagram([UInt8])
    case transportParameters(QMuxTransportParameters)
    /// QX_PING type 0x348c67529ef8c7bd: asks the peer to respond.
    case ping(sequence: UInt64)
    /// QX_PING type 0x348c67529ef8c7be: the response, echoing the request's sequence number.
    case pingResponse(sequence: UInt64)
}

/// Frame type code points.
enum QMuxFrameType {
    static let padding: UInt64 = 0x00
    static let ping: UInt64 = 0x01  // QUIC PING: prohibited in QMux
    static let resetStream: UInt64 = 0x04
    static let stopSending: UInt64 = 0x05
    static let streamBase: UInt64 = 0x08  // 0x08...0x0f; OFF 0x04, LEN 0x02, FIN 0x01
    static let maxData: UInt64 = 0x10
    static let maxStreamData: UInt64 = 0x11
    static let maxStreamsBidi: UInt64 = 0x12
    static let maxStreamsUni: UInt64 = 0x13
    static let dataBlocked: UInt64 = 0x14
    static let streamDataBlocked: UInt64 = 0x15
    static let streamsBlockedBidi: UInt64 = 0x16
    static let streamsBlockedUni: UInt64 = 0x17
    static let connectionCloseTransport: UInt64 = 0x1c
    static let connectionCloseApplication: UInt64 = 0x1d
    static let datagram: UInt64 = 0x30  // no Length: extends to the end of the record
    static let datagramWithLength: UInt64 = 0x31
    /// On the wire: ff 51 53 30 0d 0a 0d 0a ("\xffQS0\r\n\r\n"). The draft's prose says "\xffQMX\r\n\r\n", which
    /// does not match its own code point; the code point (figure and IANA table) is what we use.
    static let qxTransportParameters: UInt64 = 0x3f51_5330_0d0a_0d0a
    static let qxPing: UInt64 = 0x348c_6752_9ef8_c7bd
    static let qxPingResponse: UInt64 = 0x348c_6752_9ef8_c7be

    /// QUIC v1 frames §4 prohibits, by type: PING, ACK (0x02-0x03), CRYPTO, NEW_TOKEN, NEW_CONNECTION_ID,
    /// RETIRE_CONNECTION_ID, PATH_CHALLENGE, PATH_RESPONSE, HANDSHAKE_DONE.
    static func prohibitedName(_ type: UInt64) -> String? {
        switch type {
        case 0x01: return "PING"
        case 0x02, 0x03: return "ACK"
        case 0x06: return "CRYPTO"
        case 0x07: return "NEW_TOKEN"
        case 0x18: return "NEW_CONNECTION_ID"
        case 0x19: return "RETIRE_CONNECTION_ID"
        case 0x1a: return "PATH_CHALLENGE"
        case 0x1b: return "PATH_RESPONSE"
        case 0x1e: return "HANDSHAKE_DONE"
        default: return nil
        }
    }

    static let maxStreamsLimit: UInt64 = 1 << 60  // RFC 9000 §19.11 / §19.14
}

/// A cursor over the bytes of one record's Frames field. Running past the end is a truncated frame:
/// FRAME_ENCODING_ERROR (§3.2).
struct QMuxFrameReader {
    let bytes: ArraySlice<UInt8>
    private(set) var index: Int
    var frameType: UInt64 = 0

    init(_ bytes: ArraySlice<UInt8>) {
        self.bytes = bytes
        self.index = bytes.startIndex
    }

    var isAtEnd: Bool { index >= bytes.endIndex }
    var remaining: Int { bytes.endIndex - index }

    mutating func varint(_ field: String) throws(QMuxError) -> UInt64 {
        guard let (value, length) = VarInt.decode(bytes, at: index) else {
            throw truncated(field)
        }
        index += length
        return value
    }

    mutating func take(_ count: UInt64, _ field: String) throws(QMuxError) -> ArraySlice<UInt8> {
        guard count <= UInt64(remaining) else { throw truncated(field) }
        let end = index + Int(count)
        defer { index = end }
        return bytes[index..<end]
    }

    mutating func takeRest() -> ArraySlice<UInt8> {
        defer { index = bytes.endIndex }
        return bytes[index...]
    }

    mutating func skipZeros() -> Int {
        let start = index
        while index < bytes.endIndex && bytes[index] == 0 { index += 1 }
        return index - start
    }

    func truncated(_ field: String) -> QMuxError {
        QMuxError(
            .frameEncodingError, frameType: frameType,
            "frame truncated at the end of its record (\(field) missing; §3.2: frames must not span records)")
    }
}

extension QMuxFrame {
    /// Parses one frame at the reader's position. Throws FRAME_ENCODING_ERROR for a truncated, unknown or
    /// prohibited frame (§4), PROTOCOL_VIOLATION for a frame type not in its shortest encoding (RFC 9000 §12.4),
    /// TRANSPORT_PARAMETER_ERROR for a malformed QX_TRANSPORT_PARAMETERS payload.
    static func parse(_ reader: inout QMuxFrameReader) throws(QMuxError) -> QMuxFrame {
        let typeStart = reader.index
        reader.frameType = 0
        let type = try reader.varint("frame type")
        reader.frameType = type
        if reader.index - typeStart != VarInt.encodedLength(type) {
            throw QMuxError(
                .protocolViolation, frameType: type,
                "frame type 0x\(String(type, radix: 16)) not in its shortest encoding (RFC 9000 §12.4)")
        }
        switch type {
        case QMuxFrameType.padding:
            return .padding(count: 1 + reader.skipZeros())
        case QMuxFrameType.resetStream:
            let id = try reader.varint("Stream ID")
            let code = try reader.varint("Application Protocol Error Code")
            let finalSize = try reader.varint("Final Size")
            return .resetStream(streamID: id, errorCode: code, finalSize: finalSize)
        case QMuxFrameType.stopSending:
            let id = try reader.varint("Stream ID")
            let code = try reader.varint("Application Protocol Error Code")
            return .stopSending(streamID: id, errorCode: code)
        case 0x08...0x0f:
            let id = try reader.varint("Stream ID")
            let offset: UInt64 = if type & 0x04 != 0 { try reader.varint("Offset") } else { 0 }
            let data: ArraySlice<UInt8>
            if type & 0x02 != 0 {
                let length = try reader.varint("Length")
                data = try reader.take(length, "Stream Data")
            } else {
                data = reader.takeRest()
            }
            if offset + UInt64(data.count) > VarInt.max {
                throw QMuxError(
                    .frameEncodingError, frameType: type,
                    "STREAM data would end beyond 2^62-1 (RFC 9000 §19.8)")
            }
            return .stream(streamID: id, offset: offset, data: Array(data), fin: type & 0x01 != 0)
        case QMuxFrameType.maxData:
            return .maxData(try reader.varint("Maximum Data"))
        case QMuxFrameType.maxStreamData:
            let id = try reader.varint("Stream ID")
            return .maxStreamData(streamID: id, maximum: try reader.varint("Maximum Stream Data"))
        case QMuxFrameType.maxStreamsBidi, QMuxFrameType.maxStreamsUni:
            let maximum = try reader.varint("Maximum Streams")
            guard maximum <= QMuxFrameType.maxStreamsLimit else {
                throw QMuxError(
                    .frameEncodingError, frameType: type,
                    "MAX_STREAMS \(maximum) exceeds 2^60 (RFC 9000 §19.11)")
            }
            return .maxStreams(bidirectional: type == QMuxFrameType.maxStreamsBidi, maximum: maximum)
        case QMuxFrameType.dataBlocked:
            return .dataBlocked(limit: try reader.varint("Maximum Data"))
        case QMuxFrameType.streamDataBlocked:
            let id = try reader.varint("Stream ID")
            return .streamDataBlocked(streamID: id, limit: try reader.varint("Maximum Stream Data"))
        case QMuxFrameType.streamsBlockedBidi, QMuxFrameType.streamsBlockedUni:
            let limit = try reader.varint("Maximum Streams")
            guard limit <= QMuxFrameType.maxStreamsLimit else {
                throw QMuxError(
                    .frameEncodingError, frameType: type,
                    "STREAMS_BLOCKED \(limit) exceeds 2^60 (RFC 9000 §19.14)")
            }
            return .streamsBlocked(bidirectional: type == QMuxFrameType.streamsBlockedBidi, limit: limit)
        case QMuxFrameType.connectionCloseTransport, QMuxFrameType.connectionCloseApplication:
            let code = try reader.varint("Error Code")
            let frameType: UInt64? =
                if type == QMuxFrameType.connectionCloseTransport { try reader.varint("Frame Type") } else { nil }
            let length = try reader.varint("Reason Phrase Length")
            let reason = try reader.take(length, "Reason Phrase")
            return .connectionClose(
                errorCode: code, frameType: frameType, reason: String(decoding: reason, as: UTF8.self))
        case QMuxFrameType.datagram:
            return .datagram(Array(reader.takeRest()))
        case QMuxFrameType.datagramWithLength:
            let length = try reader.varint("Length")
            return .datagram(Array(try reader.take(length, "Datagram Data")))
        case QMuxFrameType.qxTransportParameters:
            let length = try reader.varint("Length")
            let payload = try reader.take(length, "Transport Parameters")
            return .transportParameters(try QMuxTransportParameters.decode(payload))
        case QMuxFrameType.qxPing:
            return .ping(sequence: try reader.varint("Sequence Number"))
        case QMuxFrameType.qxPingResponse:
            return .pingResponse(sequence: try reader.varint("Sequence Number"))
        default:
            if let name = QMuxFrameType.prohibitedName(type) {
                throw QMuxError(
                    .frameEncodingError, frameType: type,
                    "\(name) frame (type 0x\(String(type, radix: 16))) is prohibited in QMux (§4)")
            }
            throw QMuxError(
                .frameEncodingError, frameType: type,
                "unknown frame type 0x\(String(type, radix: 16)) (RFC 9000 §12.4)")
        }
    }

    /// Parses every frame of one record's Frames field (tests and tools; the connection parses incrementally).
    package static func parseAll(_ frames: ArraySlice<UInt8>) throws(QMuxError) -> [QMuxFrame] {
        var reader = QMuxFrameReader(frames)
        var result: [QMuxFrame] = []
        while !reader.isAtEnd { result.append(try parse(&reader)) }
        return result
    }

    /// Appends the frame's wire encoding. STREAM frames always carry an explicit Length (type 0x0a/0x0b, with
    /// OFF set when the offset is non-zero); DATAGRAM frames use type 0x31 (with Length).
    func encode(into out: inout [UInt8]) {
        switch self {
        case .padding(let count):
            out.append(contentsOf: repeatElement(0, count: count))
        case .resetStream(let id, let code, let finalSize):
            VarInt.encode(QMuxFrameType.resetStream, into: &out)
            VarInt.encode(id, into: &out)
            VarInt.encode(code, into: &out)
            VarInt.encode(finalSize, into: &out)
        case .stopSending(let id, let code):
            VarInt.encode(QMuxFrameType.stopSending, into: &out)
            VarInt.encode(id, into: &out)
            VarInt.encode(code, into: &out)
        case .stream(let id, let offset, let data, let fin):
            let type = QMuxFrameType.streamBase | 0x02 | (offset != 0 ? 0x04 : 0) | (fin ? 0x01 : 0)
            VarInt.encode(type, into: &out)
            VarInt.encode(id, into: &out)
            if offset != 0 { VarInt.encode(offset, into: &out) }
            VarInt.encode(UInt64(data.count), into: &out)
            out.append(contentsOf: data)
        case .maxData(let maximum):
            VarInt.encode(QMuxFrameType.maxData, into: &out)
            VarInt.encode(maximum, into: &out)
        case .maxStreamData(let id, let maximum):
            VarInt.encode(QMuxFrameType.maxStreamData, into: &out)
            VarInt.encode(id, into: &out)
            VarInt.encode(maximum, into: &out)
        case .maxStreams(let bidirectional, let maximum):
            VarInt.encode(bidirectional ? QMuxFrameType.maxStreamsBidi : QMuxFrameType.maxStreamsUni, into: &out)
            VarInt.encode(maximum, into: &out)
        case .dataBlocked(let limit):
            VarInt.encode(QMuxFrameType.dataBlocked, into: &out)
            VarInt.encode(limit, into: &out)
        case .streamDataBlocked(let id, let limit):
            VarInt.encode(QMuxFrameType.streamDataBlocked, into: &out)
            VarInt.encode(id, into: &out)
            VarInt.encode(limit, into: &out)
        case .streamsBlocked(let bidirectional, let limit):
            VarInt.encode(
                bidirectional ? QMuxFrameType.streamsBlockedBidi : QMuxFrameType.streamsBlockedUni,
                into: &out)
            VarInt.encode(limit, into: &out)
        case .connectionClose(let code, let frameType, let reason):
            let phrase = Array(reason.utf8)
            if let frameType {
                VarInt.encode(QMuxFrameType.connectionCloseTransport, into: &out)
                VarInt.encode(code, into: &out)
                VarInt.encode(frameType, into: &out)
            } else {
                VarInt.encode(QMuxFrameType.connectionCloseApplication, into: &out)
                VarInt.encode(code, into: &out)
            }
            VarInt.encode(UInt64(phrase.count), into: &out)
            out.append(contentsOf: phrase)
        case .datagram(let data):
            VarInt.encode(QMuxFrameType.datagramWithLength, into: &out)
            VarInt.encode(UInt64(data.count), into: &out)
            out.append(contentsOf: data)
        case .transportParameters(let parameters):
            let payload = parameters.encode()
            VarInt.encode(QMuxFrameType.qxTransportParameters, into: &out)
            VarInt.encode(UInt64(payload.count), into: &out)
            out.append(contentsOf: payload)
        case .ping(let sequence):
            VarInt.encode(QMuxFrameType.qxPing, into: &out)
            VarInt.encode(sequence, into: &out)
        case .pingResponse(let sequence):
            VarInt.encode(QMuxFrameType.qxPingResponse, into: &out)
            VarInt.encode(sequence, into: &out)
        }
    }

    package var encoded: [UInt8] {
        var out: [UInt8] = []
        encode(into: &out)
        return out
    }

    /// The bytes a STREAM frame (as `encode` writes it) spends before its data.
    static func streamHeaderLength(streamID: UInt64, offset: UInt64, dataLength: Int) -> Int {
        1 + VarInt.encodedLength(streamID) + (offset != 0 ? VarInt.encodedLength(offset) : 0)
            + VarInt.encodedLength(UInt64(dataLength))
    }

    /// The size of a DATAGRAM frame (type 0x31) carrying `length` bytes: what max_datagram_frame_size bounds.
    static func datagramFrameLength(_ length: Int) -> Int {
        1 + VarInt.encodedLength(UInt64(length)) + length
    }
}
