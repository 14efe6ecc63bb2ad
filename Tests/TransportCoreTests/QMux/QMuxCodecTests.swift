import TestSupport
import Testing

@testable import TransportCore

@Suite("QMux records, frames and transport parameters")
struct QMuxCodecTests {
    static let sampleFrames: [QMuxFrame] = [
        .padding(count: 1),
        .padding(count: 7),
        .resetStream(streamID: 4, errorCode: 0x1234, finalSize: 99_999),
        .stopSending(streamID: 1, errorCode: 7),
        .stream(streamID: 0, offset: 0, data: [], fin: true),
        .stream(streamID: 0, offset: 0, data: Array("hello".utf8), fin: false),
        .stream(streamID: 5, offset: 70_000, data: [1, 2, 3], fin: true),
        .stream(streamID: (1 << 62) - 1, offset: (1 << 62) - 2, data: [9], fin: false),
        .maxData(0),
        .maxData(VarInt.max),
        .maxStreamData(streamID: 8, maximum: 1 << 40),
        .maxStreams(bidirectional: true, maximum: 1 << 60),
        .maxStreams(bidirectional: false, maximum: 3),
        .dataBlocked(limit: 16384),
        .streamDataBlocked(streamID: 2, limit: 63),
        .streamsBlocked(bidirectional: true, limit: 64),
        .streamsBlocked(bidirectional: false, limit: 0),
        .connectionClose(errorCode: 0x0a, frameType: 0x08, reason: "bad offset"),
        .connectionClose(errorCode: 0, frameType: 0, reason: ""),
        .connectionClose(errorCode: 0x42, frameType: nil, reason: "bye — ünïcode"),
        .datagram([0xde, 0xad]),
        .datagram(Array(repeating: 7, count: 1000)),
        .transportParameters(QMuxTransportParameters()),
        .transportParameters(qmuxTestParameters(idleMilliseconds: 30_000)),
        .ping(sequence: 0),
        .ping(sequence: 1 << 40),
        .pingResponse(sequence: 16383),
    ]

    @Test func everyFrameRoundTrips() throws {
        for frame in Self.sampleFrames {
            let parsed = try QMuxFrame.parseAll(frame.encoded[...])
            #expect(parsed == [frame], "\(frame)")
        }
        // All of them in one record, back to back.
        var body: [UInt8] = []
        for frame in Self.sampleFrames where frame != .padding(count: 1) && frame != .padding(count: 7) {
            frame.encode(into: &body)
        }
        let parsed = try QMuxFrame.parseAll(body[...])
        #expect(parsed == Self.sampleFrames.filter { if case .padding = $0 { false } else { true } })
    }

    @Test func recordsReassembleFromSingleBytes() throws {
        let frames: [QMuxFrame] = [
            .maxData(5), .ping(sequence: 3), .stream(streamID: 4, offset: 0, data: [1, 2], fin: true),
        ]
        var wire = qmuxRecord([frames[0]]) + qmuxRecord(Array(frames[1...]))
        wire += qmuxRecord([.datagram(Array(repeating: 1, count: 300))])  // 2-byte Size field
        var reader = QMuxRecordReader(maxRecordSize: 16382)
        var records: [[QMuxFrame]] = []
        for byte in wire {
            reader.append([byte])
            while let record = try reader.next() { records.append(try QMuxFrame.parseAll(record)) }
        }
        #expect(records == [[frames[0]], Array(frames[1...]), [.datagram(Array(repeating: 1, count: 300))]])
        #expect(reader.bufferedCount == 0)
    }

    @Test func qxTransportParametersTypeIsTheMagicOnTheWire() {
        let bytes = QMuxFrame.transportParameters(QMuxTransportParameters()).encoded
        // 0x3f5153300d0a0d0a as an 8-byte varint: 0xff 'Q' 'S' '0' CR LF CR LF.
        #expect(Array(bytes.prefix(8)) == [0xff, 0x51, 0x53, 0x30, 0x0d, 0x0a, 0x0d, 0x0a])
        #expect(bytes.count == 9)  // empty parameters: Length 0
    }

    @Test func qxPingTypes() {
        let request = QMuxFrame.ping(sequence: 1).encoded
        let response = QMuxFrame.pingResponse(sequence: 1).encoded
        #expect(Array(request.prefix(8)) == [0xf4, 0x8c, 0x67, 0x52, 0x9e, 0xf8, 0xc7, 0xbd])
        #expect(Array(response.prefix(8)) == [0xf4, 0x8c, 0x67, 0x52, 0x9e, 0xf8, 0xc7, 0xbe])
    }

    @Test func transportParametersRoundTrip() throws {
        let full = QMuxTransportParameters(
            maxIdleTimeout: 30_000, initialMaxData: 1 << 30,
            initialMaxStreamDataBidiLocal: 65_536, initialMaxStreamDataBidiRemote: 1,
            initialMaxStreamDataUni: 16_383, initialMaxStreamsBidi: 1 << 60,
            initialMaxStreamsUni: 64, maxDatagramFrameSize: 65_535,
            maxRecordSize: 1 << 20)
        #expect(try QMuxTransportParameters.decode(full.encode()[...]) == full)
        #expect(QMuxTransportParameters().encode().isEmpty)
        #expect(try QMuxTransportParameters.decode([][...]) == QMuxTransportParameters())
        // Unknown and reserved (31 * N + 27) parameters are ignored.
        var withUnknown = full.encode()
        for id: UInt64 in [27, 31 * 1000 + 27, 0x4000, 0x2ab2] {
            VarInt.encode(id, into: &withUnknown)
            VarInt.encode(3, into: &withUnknown)
            withUnknown += [1, 2, 3]
        }
        #expect(try QMuxTransportParameters.decode(withUnknown[...]) == full)
        // A non-minimal varint value is still one integer.
        let padded: [UInt8] = [0x04, 0x08, 0xc0, 0, 0, 0, 0, 0, 0x10, 0]
        #expect(try QMuxTransportParameters.decode(padded[...]).initialMaxData == 0x1000)
    }

    @Test func transportParameterErrors() {
        func entry(_ id: UInt64, _ value: [UInt8]) -> [UInt8] {
            var out: [UInt8] = []
            VarInt.encode(id, into: &out)
            VarInt.encode(UInt64(value.count), into: &out)
            return out + value
        }
        func varint(_ value: UInt64) -> [UInt8] {
            var out: [UInt8] = []
            VarInt.encode(value, into: &out)
            return out
        }
        var cases: [[UInt8]] = [
            entry(0x04, varint(10)) + entry(0x04, varint(10)),  // duplicate
            entry(0x08, varint((1 << 60) + 1)),  // too many streams
            entry(0x0571_c594_29cd_0845, varint(16381)),  // max_record_size below 16382
            entry(0x01, [0x40]),  // truncated integer
            entry(0x01, [0x05, 0x05]),  // two integers in one value
            [0x04, 0x05, 0x01],  // value runs past the end
            [0x40],  // truncated ID
        ]
        for prohibited: UInt64 in [0x00, 0x02, 0x03, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10] {
            cases.append(entry(prohibited, varint(1)))
        }
        for payload in cases {
            #expect(throws: QMuxError.self) { try QMuxTransportParameters.decode(payload[...]) }
            do throws(QMuxError) {
                _ = try QMuxTransportParameters.decode(payload[...])
            } catch {
                #expect(error.transportCode == .transportParameterError, "\(payload): \(error)")
            }
        }
        // max_record_size of exactly 16382 is fine.
        #expect((try? QMuxTransportParameters.decode(entry(0x0571_c594_29cd_0845, varint(16382))[...])) != nil)
    }

    @Test func prohibitedFramesAreFrameEncodingErrors() {
        for type: UInt64 in [0x01, 0x02, 0x03, 0x06, 0x07, 0x18, 0x19, 0x1a, 0x1b, 0x1e] {
            var bytes: [UInt8] = []
            VarInt.encode(type, into: &bytes)
            bytes += [0, 0, 0, 0, 0, 0, 0, 0]
            #expect(parseError(bytes)?.transportCode == .frameEncodingError, "type \(type)")
            #expect(parseError(bytes)?.frameType == type)
        }
        // Unknown types too (RFC 9000 §12.4).
        for type: UInt64 in [0x1f, 0x20, 0x21, 0x32, 0x4000, 0x3f51_5330_0d0a_0d0b] {
            var bytes: [UInt8] = []
            VarInt.encode(type, into: &bytes)
            #expect(parseError(bytes)?.transportCode == .frameEncodingError, "type \(type)")
        }
    }

    @Test func everyTruncationIsAFrameEncodingError() {
        for frame in Self.sampleFrames {
            if case .padding = frame { continue }
            let bytes = frame.encoded
            for cut in 1..<bytes.count {
                let error = parseError(Array(bytes[0..<cut]))
                #expect(
                    error?.transportCode == .frameEncodingError, "\(frame) cut at \(cut): \(String(describing: error))")
            }
        }
    }

    @Test func frameLengthForms() throws {
        // STREAM without LEN (0x08 / 0x0c / 0x0d) runs to the end of the record; DATAGRAM 0x30 too.
        #expect(
            try QMuxFrame.parseAll([0x08, 0x04, 1, 2, 3][...]) == [
                .stream(streamID: 4, offset: 0, data: [1, 2, 3], fin: false)
            ])
        #expect(
            try QMuxFrame.parseAll([0x0d, 0x04, 0x0a, 9][...]) == [
                .stream(streamID: 4, offset: 10, data: [9], fin: true)
            ])
        #expect(try QMuxFrame.parseAll([0x30, 5, 6][...]) == [.datagram([5, 6])])
        // Non-minimal field values are accepted; a non-minimal frame type is not.
        #expect(try QMuxFrame.parseAll([0x10, 0x80, 0, 0, 0x05][...]) == [.maxData(5)])
        #expect(parseError([0x40, 0x10, 0x05])?.transportCode == .protocolViolation)
        // Limits: MAX_STREAMS above 2^60, STREAM ending past 2^62-1.
        var bytes: [UInt8] = []
        QMuxFrame.maxStreams(bidirectional: true, maximum: 1 << 60).encode(into: &bytes)
        bytes[bytes.count - 1] = 1  // 2^60 + 1
        #expect(parseError(bytes)?.transportCode == .frameEncodingError)
        let tooFar = QMuxFrame.stream(streamID: 0, offset: VarInt.max, data: [1], fin: false).encoded
        #expect(parseError(tooFar)?.transportCode == .frameEncodingError)
    }

    @Test func varintEdgeCases() throws {
        for value: UInt64 in [0, 63, 64, 16383, 16384, (1 << 30) - 1, 1 << 30, VarInt.max] {
            var bytes: [UInt8] = []
            VarInt.encode(value, into: &bytes)
            let decoded = try #require(VarInt.decode(bytes, at: 0))
            #expect(decoded.value == value && decoded.length == bytes.count)
            #expect(VarInt.decode(Array(bytes.dropLast()), at: 0) == nil)
            #expect(try QMuxFrame.parseAll(QMuxFrame.maxData(value).encoded[...]) == [.maxData(value)])
        }
        // Record Size fields of 1, 2 and 4 bytes.
        for size in [1, 63, 64, 16382, 16384] {
            var record: [UInt8] = []
            QMuxRecord.encode(frames: [UInt8](repeating: 0, count: size), into: &record)
            var reader = QMuxRecordReader(maxRecordSize: 1 << 20)
            reader.append(record)
            #expect(try reader.next()?.count == size)
        }
    }

    @Test func recordLimits() {
        var reader = QMuxRecordReader(maxRecordSize: 16382)
        reader.append([0x7f, 0xff])  // Size 16383: rejected before any of its bytes arrive
        #expect(throws: QMuxError.self) { try reader.next() }
        var empty = QMuxRecordReader(maxRecordSize: 16382)
        empty.append([0x00])
        do throws(QMuxError) {
            _ = try empty.next()
            Issue.record("empty record accepted")
        } catch {
            #expect(error.transportCode == .protocolViolation)
        }
    }

    private func parseError(_ bytes: [UInt8]) -> QMuxError? {
        do throws(QMuxError) {
            _ = try QMuxFrame.parseAll(bytes[...])
            return nil
        } catch {
            return error
        }
    }
}
