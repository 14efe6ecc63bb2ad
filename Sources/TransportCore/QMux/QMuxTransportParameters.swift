/// The transport parameters one endpoint declares in its QX_TRANSPORT_PARAMETERS frame
/// (draft-ietf-quic-qmux-01 §4.2, §5), encoded as in RFC 9000 §18: a sequence of (ID (i), Length (i), Value).
///
/// Permitted (§5.1): max_idle_timeout, initial_max_data, initial_max_stream_data_bidi_local/_bidi_remote/_uni,
/// initial_max_streams_bidi/_uni; max_record_size (§5.2); max_datagram_frame_size (RFC 9221, permitted by
/// §9.1). Every other RFC 9000 parameter (0x00, 0x02, 0x03, 0x0a-0x10) is prohibited: receiving one is a
/// TRANSPORT_PARAMETER_ERROR. Parameters not defined in RFC 9000 and not usable on QMux are ignored.
package struct QMuxTransportParameters: Hashable, Sendable {
    /// max_idle_timeout in milliseconds; 0 means none (RFC 9000 §10.1).
    var maxIdleTimeout: UInt64
    var initialMaxData: UInt64
    var initialMaxStreamDataBidiLocal: UInt64
    var initialMaxStreamDataBidiRemote: UInt64
    var initialMaxStreamDataUni: UInt64
    var initialMaxStreamsBidi: UInt64
    var initialMaxStreamsUni: UInt64
    /// max_datagram_frame_size (RFC 9221 §3): the largest DATAGRAM frame, type and length included, this endpoint
    /// accepts; 0 (the default) means no DATAGRAM support.
    var maxDatagramFrameSize: UInt64
    /// max_record_size (§5.2): the largest Frames field this endpoint accepts; never below 16382.
    var maxRecordSize: UInt64

    /// The initial (and minimum) value of max_record_size (§5.2): a 2-byte Size plus 16382 bytes fill 16 KiB.
    package static let defaultMaxRecordSize: UInt64 = 16382

    package init(
        maxIdleTimeout: UInt64 = 0, initialMaxData: UInt64 = 0, initialMaxStreamDataBidiLocal: UInt64 = 0,
        initialMaxStreamDataBidiRemote: UInt64 = 0, initialMaxStreamDataUni: UInt64 = 0,
        initialMaxStreamsBidi: UInt64 = 0, initialMaxStreamsUni: UInt64 = 0, maxDatagramFrameSize: UInt64 = 0,
        maxRecordSize: UInt64 = QMuxTransportParameters.defaultMaxRecordSize
    ) {
        self.maxIdleTimeout = maxIdleTimeout
        self.initialMaxData = initialMaxData
        self.initialMaxStreamDataBidiLocal = initialMaxStreamDataBidiLocal
        self.initialMaxStreamDataBidiRemote = initialMaxStreamDataBidiRemote
        self.initialMaxStreamDataUni = initialMaxStreamDataUni
        self.initialMaxStreamsBidi = initialMaxStreamsBidi
        self.initialMaxStreamsUni = initialMaxStreamsUni
        self.maxDatagramFrameSize = maxDatagramFrameSize
        self.maxRecordSize = maxRecordSize
    }

    /// The name of a limit these (the server's new) parameters set below `remembered`, the values a 0-RTT client
    /// used (QUIC §7.4.1; max_datagram_frame_size per RFC 9221 §3; max_record_size likewise), or nil.
    func reducedLimit(comparedTo remembered: QMuxTransportParameters) -> String? {
        let limits: [(String, UInt64, UInt64)] = [
            ("initial_max_data", initialMaxData, remembered.initialMaxData),
            (
                "initial_max_stream_data_bidi_local", initialMaxStreamDataBidiLocal,
                remembered.initialMaxStreamDataBidiLocal
            ),
            (
                "initial_max_stream_data_bidi_remote", initialMaxStreamDataBidiRemote,
                remembered.initialMaxStreamDataBidiRemote
            ),
            ("initial_max_stream_data_uni", initialMaxStreamDataUni, remembered.initialMaxStreamDataUni),
            ("initial_max_streams_bidi", initialMaxStreamsBidi, remembered.initialMaxStreamsBidi),
            ("initial_max_streams_uni", initialMaxStreamsUni, remembered.initialMaxStreamsUni),
            ("max_datagram_frame_size", maxDatagramFrameSize, remembered.maxDatagramFrameSize),
            ("max_record_size", maxRecordSize, remembered.maxRecordSize),
        ]
        return limits.first { $0.1 < $0.2 }?.0
    }

    /// Transport parameter IDs.
    enum ID {
        static let maxIdleTimeout: UInt64 = 0x01
        static let initialMaxData: UInt64 = 0x04
        static let initialMaxStreamDataBidiLocal: UInt64 = 0x05
        static let initialMaxStreamDataBidiRemote: UInt64 = 0x06
        static let initialMaxStreamDataUni: UInt64 = 0x07
        static let initialMaxStreamsBidi: UInt64 = 0x08
        static let initialMaxStreamsUni: UInt64 = 0x09
        static let maxDatagramFrameSize: UInt64 = 0x20
        static let maxRecordSize: UInt64 = 0x0571_c594_29cd_0845

        /// The RFC 9000 parameters §5.1 prohibits in QMux.
        static func prohibitedName(_ id: UInt64) -> String? {
            switch id {
            case 0x00: return "original_destination_connection_id"
            case 0x02: return "stateless_reset_token"
            case 0x03: return "max_udp_payload_size"
            case 0x0a: return "ack_delay_exponent"
            case 0x0b: return "max_ack_delay"
            case 0x0c: return "disable_active_migration"
            case 0x0d: return "preferred_address"
            case 0x0e: return "active_connection_id_limit"
            case 0x0f: return "initial_source_connection_id"
            case 0x10: return "retry_source_connection_id"
            default: return nil
            }
        }
    }

    /// The encoded parameters (the payload of QX_TRANSPORT_PARAMETERS). Parameters equal to their default
    /// are omitted, so an all-default value encodes to nothing.
    package func encode() -> [UInt8] {
        var out: [UInt8] = []
        func put(_ id: UInt64, _ value: UInt64, default defaultValue: UInt64 = 0) {
            guard value != defaultValue else { return }
            VarInt.encode(id, into: &out)
            VarInt.encode(UInt64(VarInt.encodedLength(value)), into: &out)
            VarInt.encode(value, into: &out)
        }
        put(ID.maxIdleTimeout, maxIdleTimeout)
        put(ID.initialMaxData, initialMaxData)
        put(ID.initialMaxStreamDataBidiLocal, initialMaxStreamDataBidiLocal)
        put(ID.initialMaxStreamDataBidiRemote, initialMaxStreamDataBidiRemote)
        put(ID.initialMaxStreamDataUni, initialMaxStreamDataUni)
        put(ID.initialMaxStreamsBidi, initialMaxStreamsBidi)
        put(ID.initialMaxStreamsUni, initialMaxStreamsUni)
        put(ID.maxDatagramFrameSize, maxDatagramFrameSize)
        put(ID.maxRecordSize, maxRecordSize, default: Self.defaultMaxRecordSize)
        return out
    }

    /// Decodes a QX_TRANSPORT_PARAMETERS payload. Every failure is TRANSPORT_PARAMETER_ERROR: a prohibited
    /// RFC 9000 parameter (§5.1), max_record_size below 16382 (§5.2), initial_max_streams_* above 2^60
    /// (RFC 9000 §18.2), a duplicate (RFC 9000 §7.4), or a malformed entry.
    package static func decode(_ payload: ArraySlice<UInt8>) throws(QMuxError) -> QMuxTransportParameters {
        var parameters = QMuxTransportParameters()
        var seen: Set<UInt64> = []
        var index = payload.startIndex
        func fail(_ message: String) -> QMuxError {
            QMuxError(.transportParameterError, frameType: QMuxFrameType.qxTransportParameters, message)
        }
        while index < payload.endIndex {
            guard let (id, idLength) = VarInt.decode(payload, at: index) else { throw fail("truncated parameter ID") }
            index += idLength
            guard let (length, lengthLength) = VarInt.decode(payload, at: index) else {
                throw fail("truncated length of parameter 0x\(String(id, radix: 16))")
            }
            index += lengthLength
            guard length <= UInt64(payload.endIndex - index) else {
                throw fail("parameter 0x\(String(id, radix: 16)) runs past the end of the frame")
            }
            let value = payload[index..<(index + Int(length))]
            index += Int(length)
            guard seen.insert(id).inserted else {
                throw fail("parameter 0x\(String(id, radix: 16)) appears twice (RFC 9000 §7.4)")
            }
            if let name = ID.prohibitedName(id) {
                throw fail("\(name) (0x\(String(id, radix: 16))) is prohibited in QMux (§5.1)")
            }
            func integer() throws(QMuxError) -> UInt64 {
                guard let (number, used) = VarInt.decode(value, at: value.startIndex), used == value.count else {
                    throw fail("parameter 0x\(String(id, radix: 16)) is not a single variable-length integer")
                }
                return number
            }
            switch id {
            case ID.maxIdleTimeout: parameters.maxIdleTimeout = try integer()
            case ID.initialMaxData: parameters.initialMaxData = try integer()
            case ID.initialMaxStreamDataBidiLocal: parameters.initialMaxStreamDataBidiLocal = try integer()
            case ID.initialMaxStreamDataBidiRemote: parameters.initialMaxStreamDataBidiRemote = try integer()
            case ID.initialMaxStreamDataUni: parameters.initialMaxStreamDataUni = try integer()
            case ID.initialMaxStreamsBidi, ID.initialMaxStreamsUni:
                let count = try integer()
                guard count <= QMuxFrameType.maxStreamsLimit else {
                    throw fail(
                        "initial_max_streams 0x\(String(id, radix: 16)) = \(count) exceeds 2^60 (RFC 9000 §18.2)")
                }
                if id == ID.initialMaxStreamsBidi {
                    parameters.initialMaxStreamsBidi = count
                } else {
                    parameters.initialMaxStreamsUni = count
                }
            case ID.maxDatagramFrameSize: parameters.maxDatagramFrameSize = try integer()
            case ID.maxRecordSize:
                let size = try integer()
                guard size >= defaultMaxRecordSize else {
                    throw fail("max_record_size \(size) is below the initial value 16382 (§5.2)")
                }
                parameters.maxRecordSize = size
            default:
                break  // not defined in RFC 9000 and not usable on QMux: ignored (§5.1)
            }
        }
        return parameters
    }
}
