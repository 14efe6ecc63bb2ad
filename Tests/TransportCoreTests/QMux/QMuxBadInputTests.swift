import TestSupport
import Testing

@testable import TransportCore

/// A server connection fed hand-made records, as a misbehaving client would send them.
private final class QMuxVictim {
    let connection: QMuxConnection
    let now: UInt64 = 5_000_000_000

    init(parameters: QMuxTransportParameters = qmuxTestParameters(window: 1000, streams: 2, datagrams: 0)) {
        connection = QMuxConnection(role: .server, localParameters: parameters, now: now)
        _ = connection.takeOutput()  // our QX_TRANSPORT_PARAMETERS
    }

    /// Feeds the client's QX_TRANSPORT_PARAMETERS first (unless `handshake` is false), then `bytes`; returns the
    /// error the connection closed with, or nil.
    func feed(_ bytes: [UInt8], handshake: Bool = true) -> QMuxError? {
        do throws(QMuxError) {
            if handshake { try connection.receive(qmuxRecord([.transportParameters(qmuxTestParameters())]), now: now) }
            try connection.receive(bytes, now: now)
            return nil
        } catch {
            return error
        }
    }

    /// The CONNECTION_CLOSE the connection sent.
    var sentClose: QMuxFrame? {
        (try? qmuxParseRecords(connection.takeOutput()))?.last
    }
}

@Suite("QMux bad input")
struct QMuxBadInputTests {
    private func expectClose(
        _ victim: QMuxVictim, _ error: QMuxError?, _ code: QMuxTransportErrorCode,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(error?.transportCode == code, "\(String(describing: error))", sourceLocation: sourceLocation)
        #expect(victim.connection.isClosed, sourceLocation: sourceLocation)
        if case .connectionClose(let sent, let frameType, _)? = victim.sentClose {
            #expect(sent == code.rawValue && frameType != nil, sourceLocation: sourceLocation)
        } else {
            Issue.record("no CONNECTION_CLOSE sent", sourceLocation: sourceLocation)
        }
        var last: QMuxEvent?
        while let event = victim.connection.nextEvent() { last = event }
        if let error { #expect(last == .closed(.localError(error)), sourceLocation: sourceLocation) }
    }

    @Test func firstFrameMustBeTransportParameters() {
        for first: QMuxFrame in [
            .ping(sequence: 1), .padding(count: 1), .maxData(100),
            .stream(streamID: 0, offset: 0, data: [1], fin: false),
        ] {
            let victim = QMuxVictim()
            let error = victim.feed(qmuxRecord([first, .transportParameters(qmuxTestParameters())]), handshake: false)
            expectClose(victim, error, .transportParameterError)
        }
        // Judged on the first frame's type alone: a prohibited or unknown frame first is the same error.
        for first: [UInt8] in [[0x02, 0, 0, 0, 0], [0x21], [0x1e]] {
            let victim = QMuxVictim()
            expectClose(victim, victim.feed([UInt8(first.count)] + first, handshake: false), .transportParameterError)
        }
    }

    @Test func transportParametersOnlyOnce() {
        let victim = QMuxVictim()
        let error = victim.feed(qmuxRecord([.transportParameters(qmuxTestParameters())]))
        expectClose(victim, error, .transportParameterError)
    }

    @Test func prohibitedTransportParameter() {
        let victim = QMuxVictim()
        // active_connection_id_limit (0x0e) = 2.
        let frame: [UInt8] = [0xff, 0x51, 0x53, 0x30, 0x0d, 0x0a, 0x0d, 0x0a, 3, 0x0e, 1, 2]
        let error = victim.feed([UInt8(frame.count)] + frame, handshake: false)
        expectClose(victim, error, .transportParameterError)
    }

    @Test func prohibitedFrames() {
        // ACK (0x02: largest 0, delay 0, range count 0, first range 0), NEW_CONNECTION_ID, HANDSHAKE_DONE, PING.
        let frames: [[UInt8]] = [
            [0x02, 0, 0, 0, 0],
            [0x18, 1, 0, 4, 1, 2, 3, 4] + [UInt8](repeating: 0xaa, count: 16),
            [0x1e],
            [0x01],
        ]
        for frame in frames {
            let victim = QMuxVictim()
            let error = victim.feed([UInt8(frame.count)] + frame)
            expectClose(victim, error, .frameEncodingError)
            #expect(error?.frameType == UInt64(frame[0]))
        }
    }

    @Test func truncatedFrameInsideARecord() {
        let victim = QMuxVictim()
        // A record of 3 bytes: MAX_STREAM_DATA type, stream ID, then a 2-byte varint cut after its first byte.
        let error = victim.feed([3, 0x11, 0x00, 0x40])
        expectClose(victim, error, .frameEncodingError)
    }

    @Test func oversizedRecordIsRejectedFromItsSizeField() {
        let victim = QMuxVictim()
        let error = victim.feed([0x80, 0x00, 0x40, 0x00])  // Size 16384 > 16382; no body needed
        expectClose(victim, error, .frameEncodingError)
    }

    @Test func emptyRecord() {
        let victim = QMuxVictim()
        expectClose(victim, victim.feed([0x00]), .protocolViolation)
    }

    @Test func streamGapAndOverlap() {
        for second: QMuxFrame in [
            .stream(streamID: 0, offset: 5, data: [1], fin: false),  // gap
            .stream(streamID: 0, offset: 2, data: [1, 2], fin: false),  // overlap
            .stream(streamID: 0, offset: 0, data: [1, 2, 3, 4], fin: false),  // retransmission
        ] {
            let victim = QMuxVictim()
            let error = victim.feed(
                qmuxRecord([.stream(streamID: 0, offset: 0, data: [1, 2, 3, 4], fin: false), second]))
            expectClose(victim, error, .protocolViolation)
        }
        // In-order continuation is fine, also across records.
        let victim = QMuxVictim()
        #expect(
            victim.feed(
                qmuxRecord([.stream(streamID: 0, offset: 0, data: [1, 2], fin: false)])
                    + qmuxRecord([.stream(streamID: 0, offset: 2, data: [3], fin: true)])) == nil)
    }

    @Test func dataBeyondFlowControl() {
        // Stream window 1000.
        let stream = QMuxVictim()
        let error = stream.feed(
            qmuxRecord([.stream(streamID: 0, offset: 0, data: [UInt8](repeating: 0, count: 1001), fin: false)]))
        expectClose(stream, error, .flowControlError)
        // Connection window 4000 over four... only two streams allowed: 1000 each is fine, so use a reset's final size.
        let connection = QMuxVictim(
            parameters: QMuxTransportParameters(
                initialMaxData: 1500, initialMaxStreamDataBidiRemote: 1000,
                initialMaxStreamsBidi: 4))
        let error2 = connection.feed(
            qmuxRecord([
                .stream(streamID: 0, offset: 0, data: [UInt8](repeating: 0, count: 1000), fin: false),
                .stream(streamID: 4, offset: 0, data: [UInt8](repeating: 0, count: 600), fin: false),
            ]))
        expectClose(connection, error2, .flowControlError)
        let reset = QMuxVictim()
        expectClose(
            reset, reset.feed(qmuxRecord([.resetStream(streamID: 0, errorCode: 1, finalSize: 5000)])), .flowControlError
        )
    }

    @Test func streamLimitAndState() {
        let limit = QMuxVictim()  // allows 2 client bidi streams: 0 and 4
        expectClose(
            limit, limit.feed(qmuxRecord([.stream(streamID: 8, offset: 0, data: [1], fin: false)])), .streamLimitError)
        let unopened = QMuxVictim()  // stream 1 is ours (server) and not opened
        expectClose(unopened, unopened.feed(qmuxRecord([.maxStreamData(streamID: 1, maximum: 10)])), .streamStateError)
        let receiveOnly = QMuxVictim()  // STOP_SENDING on the client's unidirectional stream 2
        expectClose(
            receiveOnly, receiveOnly.feed(qmuxRecord([.stopSending(streamID: 2, errorCode: 0)])), .streamStateError)
    }

    @Test func finalSizeErrors() {
        let changed = QMuxVictim()
        expectClose(
            changed,
            changed.feed(
                qmuxRecord([
                    .stream(streamID: 0, offset: 0, data: [1, 2], fin: true),
                    .resetStream(streamID: 4, errorCode: 0, finalSize: 0),  // keeps the connection busy: harmless
                    .stream(streamID: 0, offset: 2, data: [3], fin: false),
                ])), .finalSizeError)
        let below = QMuxVictim()
        expectClose(
            below,
            below.feed(
                qmuxRecord([
                    .stream(streamID: 0, offset: 0, data: [1, 2, 3], fin: false),
                    .resetStream(streamID: 0, errorCode: 0, finalSize: 2),
                ])), .finalSizeError)
    }

    @Test func datagramWithoutNegotiation() {
        let victim = QMuxVictim()  // advertised max_datagram_frame_size 0
        expectClose(victim, victim.feed(qmuxRecord([.datagram([1])])), .protocolViolation)
        let small = QMuxVictim(parameters: qmuxTestParameters(datagrams: 10))
        expectClose(small, small.feed(qmuxRecord([.datagram([UInt8](repeating: 1, count: 9))])), .protocolViolation)
    }

    @Test func peerCloseIsReportedAndInputAfterCloseIgnored() {
        let victim = QMuxVictim()
        #expect(
            victim.feed(qmuxRecord([.connectionClose(errorCode: 0x0a, frameType: 0x08, reason: "no"), .maxData(1)]))
                == nil)
        #expect(victim.connection.isClosed)
        #expect(victim.connection.closeReason == .peerError(code: .protocolViolation, frameType: 0x08, reason: "no"))
        #expect(victim.feed([0xff, 0xff], handshake: false) == nil)
        #expect(victim.connection.takeOutput().isEmpty)
    }

    @Test func transportEndingMidRecord() throws {
        let victim = QMuxVictim()
        #expect(victim.feed([10, 0x10]) == nil)
        victim.connection.transportClosed(now: victim.now)
        #expect(victim.connection.closeReason == .transportClosed(midRecord: true))
    }

    /// Thousands of random and mutated inputs: the connection never crashes, and after every input it is either
    /// open and usable or closed with a typed transport error, a CONNECTION_CLOSE queued, `.closed` reported.
    @Test func seededFuzz() {
        var random = SplitMix64(seed: 0x51_4d58_2d30_31)
        let valid: [[UInt8]] = [
            qmuxRecord([.stream(streamID: 0, offset: 0, data: [1, 2, 3], fin: false), .maxData(1 << 20)]),
            qmuxRecord([.stream(streamID: 0, offset: 3, data: [4], fin: true), .ping(sequence: 3)]),
            qmuxRecord([.maxStreamData(streamID: 0, maximum: 5000), .maxStreams(bidirectional: true, maximum: 9)]),
            qmuxRecord([
                .resetStream(streamID: 4, errorCode: 1, finalSize: 10), .stopSending(streamID: 4, errorCode: 2),
            ]),
            qmuxRecord([.datagram([9, 9]), .padding(count: 3), .streamsBlocked(bidirectional: false, limit: 1)]),
            qmuxRecord([.dataBlocked(limit: 7), .streamDataBlocked(streamID: 0, limit: 1), .pingResponse(sequence: 0)]),
        ]
        var closedCount = 0
        for round in 0..<3000 {
            let victim = QMuxVictim(parameters: qmuxTestParameters(window: 4000, streams: 3, datagrams: 100))
            var input = round % 5 == 0 ? [] : qmuxRecord([.transportParameters(qmuxTestParameters())])
            for _ in 0..<Int.random(in: 1...6, using: &random) {
                switch random.next() % 4 {
                case 0:  // pure noise
                    input += (0..<Int.random(in: 0...40, using: &random)).map { _ in
                        UInt8.random(in: 0...255, using: &random)
                    }
                case 1:  // a random Size with random frame bytes
                    let body = (0..<Int.random(in: 1...30, using: &random)).map { _ in
                        UInt8(truncatingIfNeeded: random.next() % 3 == 0 ? random.next() % 0x20 : random.next())
                    }
                    input += [UInt8(body.count)] + body
                default:  // a valid record, mutated
                    var record = valid[Int(random.next() % UInt64(valid.count))]
                    for _ in 0..<Int.random(in: 0...3, using: &random) {
                        let index = Int(random.next() % UInt64(record.count))
                        record[index] ^= UInt8(truncatingIfNeeded: 1 << (random.next() % 8))
                    }
                    input += record
                }
            }
            // Deliver in random pieces.
            var index = 0
            var failure: QMuxError?
            while index < input.count {
                let end = min(input.count, index + Int.random(in: 1...17, using: &random))
                do throws(QMuxError) {
                    try victim.connection.receive(input[index..<end], now: victim.now + UInt64(index))
                } catch {
                    if failure == nil { failure = error }
                }
                index = end
            }
            _ = victim.connection.takeOutput(now: victim.now + 1000)
            if let failure {
                closedCount += 1
                #expect(failure.transportCode != nil, "round \(round): \(failure)")
                #expect(victim.connection.isClosed)
                if case .localError(let reported)? = victim.connection.closeReason {
                    #expect(reported == failure)
                } else if victim.connection.closeReason == nil {
                    Issue.record("round \(round): error without close")
                }
            } else if !victim.connection.isClosed {
                // Still usable.
                _ = try? victim.connection.ping()
                #expect(!victim.connection.takeOutput().isEmpty)
            }
        }
        #expect(closedCount > 1000)
    }
}
