import TestSupport
import Testing

@testable import TransportCore

@Suite("QMux connections back to back in memory")
struct QMuxConnectionTests {
    @Test func handshakeExchangesParametersFirst() throws {
        let clientParameters = qmuxTestParameters(window: 5000, streams: 7, datagrams: 900, idleMilliseconds: 30_000)
        let serverParameters = qmuxTestParameters(window: 6000, streams: 9, datagrams: 1100, idleMilliseconds: 20_000)
        let pair = QMuxTestPair(client: clientParameters, server: serverParameters)
        // Each side's first output is its QX_TRANSPORT_PARAMETERS record, before hearing from the peer.
        let clientFirst = pair.client.takeOutput()
        #expect(
            Array(clientFirst.prefix(9)) == [UInt8(clientFirst.count - 1)] + [
                0xff, 0x51, 0x53, 0x30, 0x0d, 0x0a, 0x0d, 0x0a,
            ])
        #expect(try qmuxParseRecords(clientFirst) == [.transportParameters(clientParameters)])
        try pair.server.receive(clientFirst, now: pair.now)
        pair.pump()
        #expect(pair.client.peerParameters == serverParameters)
        #expect(pair.server.peerParameters == clientParameters)
        #expect(pair.clientEvents.first == .peerParameters(serverParameters))
        #expect(pair.serverEvents.first == .peerParameters(clientParameters))
        #expect(pair.client.availableBidirectionalStreams == 9)
        #expect(pair.client.idleTimeout == 20_000 * qmuxMillisecond)
        #expect(pair.client.maxDatagramPayload == 1100 - 3)
        #expect(pair.errors.isEmpty)
    }

    @Test func nothingDependingOnPeerParametersIsSentEarly() throws {
        let pair = QMuxTestPair()
        _ = pair.client.takeOutput()
        #expect(throws: QMuxError.self) { try pair.client.openBidirectionalStream() }
        #expect(throws: QMuxError.self) { try pair.client.sendDatagram([1]) }
        #expect(pair.client.takeOutput().isEmpty)
    }

    @Test func streamEchoWithFin() throws {
        let pair = QMuxTestPair()
        pair.pump()
        let stream = try pair.client.openBidirectionalStream()
        #expect(stream == 0)
        #expect(try pair.client.openBidirectionalStream() == 4)
        let payload = Array("join channel 7".utf8)
        try pair.client.write(stream: stream, payload, fin: true)
        pair.pump()
        #expect(pair.serverEvents.contains(.streamOpened(0)))
        #expect(pair.serverStreams[0] == QMuxReceivedStream(bytes: payload, fin: true))
        #expect(pair.clientStreams[0] == QMuxReceivedStream(bytes: payload, fin: true))
        #expect(throws: QMuxError.self) { try pair.client.write(stream: stream, [1], fin: false) }
        // Stream 0 is done on both sides; stream 4 was never used by the client and is still open.
        #expect(pair.client.streams[0] == nil && pair.server.streams[0] == nil)
        #expect(pair.errors.isEmpty)
    }

    @Test func serverInitiatedStreamsAndUnidirectional() throws {
        let pair = QMuxTestPair()
        pair.echo = false
        pair.pump()
        #expect(try pair.server.openBidirectionalStream() == 1)
        #expect(try pair.server.openUnidirectionalStream() == 3)
        #expect(try pair.client.openUnidirectionalStream() == 2)
        try pair.server.write(stream: 3, [1, 2, 3], fin: true)
        try pair.client.write(stream: 2, [4], fin: true)
        pair.pump()
        #expect(pair.clientStreams[3] == QMuxReceivedStream(bytes: [1, 2, 3], fin: true))
        #expect(pair.serverStreams[2] == QMuxReceivedStream(bytes: [4], fin: true))
        #expect(throws: QMuxError.self) { try pair.client.write(stream: 3, [1], fin: false) }
    }

    @Test func manyStreamsBeyondTheInitialLimit() throws {
        let pair = QMuxTestPair(client: qmuxTestParameters(streams: 4), server: qmuxTestParameters(streams: 4))
        pair.pump()
        var opened: [Int64] = []
        var next = 0
        for _ in 0..<1000 where opened.count < 60 {
            while let stream = try? pair.client.openBidirectionalStream() {
                opened.append(stream)
                try pair.client.write(stream: stream, Array("message \(next)".utf8), fin: true)
                next += 1
            }
            pair.pump()
        }
        #expect(opened == (0..<60).map { Int64($0 * 4) })
        for (index, stream) in opened.enumerated() {
            #expect(pair.clientStreams[stream] == QMuxReceivedStream(bytes: Array("message \(index)".utf8), fin: true))
        }
        #expect(pair.clientSent.contains { if case .streamsBlocked(true, _) = $0 { true } else { false } })
        #expect(pair.serverSent.contains { if case .maxStreams(true, _) = $0 { true } else { false } })
        #expect(pair.errors.isEmpty)
    }

    @Test func smallWindowLargeTransfer() throws {
        let small = QMuxTransportParameters(
            initialMaxData: 3000, initialMaxStreamDataBidiLocal: 1000,
            initialMaxStreamDataBidiRemote: 1000, initialMaxStreamsBidi: 10)
        let pair = QMuxTestPair(client: small, server: small)
        pair.pump()
        let stream = try pair.client.openBidirectionalStream()
        var generator = SplitMix64(seed: 42)
        let payload = (0..<300_000).map { _ in UInt8.random(in: 0...255, using: &generator) }
        try pair.client.write(stream: stream, payload, fin: true)
        let second = try pair.client.openBidirectionalStream()
        try pair.client.write(stream: second, Array(payload.prefix(5000)), fin: true)
        pair.pump()
        #expect(pair.serverStreams[stream] == QMuxReceivedStream(bytes: payload, fin: true))
        #expect(pair.clientStreams[stream] == QMuxReceivedStream(bytes: payload, fin: true))
        #expect(pair.clientStreams[second] == QMuxReceivedStream(bytes: Array(payload.prefix(5000)), fin: true))
        // No STREAM frame ever carried more than the window allows in one go.
        for frame in pair.clientSent {
            if case .stream(_, _, let data, _) = frame { #expect(data.count <= 1000) }
        }
        #expect(pair.serverSent.contains { if case .maxStreamData = $0 { true } else { false } })
        #expect(pair.serverSent.contains { if case .maxData = $0 { true } else { false } })
        #expect(pair.clientSent.contains { if case .streamDataBlocked = $0 { true } else { false } })
        #expect(pair.errors.isEmpty)
    }

    @Test func withoutConsumptionTheSenderStopsAtTheWindow() throws {
        let small = QMuxTransportParameters(
            initialMaxData: 10_000, initialMaxStreamDataBidiLocal: 2000,
            initialMaxStreamDataBidiRemote: 2000, initialMaxStreamsBidi: 10)
        let pair = QMuxTestPair(client: small, server: small)
        pair.autoConsume = false
        pair.echo = false
        pair.pump()
        let stream = try pair.client.openBidirectionalStream()
        try pair.client.write(stream: stream, Array(repeating: 1, count: 5000), fin: true)
        pair.pump()
        #expect(pair.serverStreams[stream]?.bytes.count == 2000)
        #expect(pair.client.queuedBytes(stream: stream) == 3000)
        pair.server.consumed(stream: stream, bytes: 2000)
        pair.pump()
        #expect(pair.serverStreams[stream]?.bytes.count == 4000)
        pair.server.consumed(stream: stream, bytes: 2000)
        pair.pump()
        #expect(pair.serverStreams[stream] == QMuxReceivedStream(bytes: Array(repeating: 1, count: 5000), fin: true))
    }

    @Test func datagramsBothWays() throws {
        let pair = QMuxTestPair()
        pair.pump()
        try pair.client.sendDatagram([1, 2, 3])
        try pair.client.sendDatagram(Array(repeating: 9, count: pair.client.maxDatagramPayload))
        try pair.server.sendDatagram([7])
        pair.pump()
        #expect(pair.serverDatagrams == [[1, 2, 3], Array(repeating: 9, count: 1197)])
        #expect(pair.clientDatagrams == [[7], [1, 2, 3], Array(repeating: 9, count: 1197)])
    }

    @Test func datagramsRefused() throws {
        let pair = QMuxTestPair(client: qmuxTestParameters(datagrams: 1200), server: qmuxTestParameters(datagrams: 0))
        pair.pump()
        #expect(pair.client.maxDatagramPayload == 0)
        #expect(usage { try pair.client.sendDatagram([1]) } == .datagramsNotNegotiated)
        #expect(usage { try pair.server.sendDatagram([1]) } == .datagramsNotNegotiated)

        let both = QMuxTestPair(client: qmuxTestParameters(datagrams: 100), server: qmuxTestParameters(datagrams: 50))
        both.pump()
        #expect(usage { try both.client.sendDatagram([]) } == .datagramEmpty)
        // The server accepts DATAGRAM frames of up to 50 bytes: type (1) + Length (1) + 48 bytes.
        #expect(usage { try both.client.sendDatagram(Array(repeating: 0, count: 49)) } == .datagramTooLarge)
        try both.client.sendDatagram(Array(repeating: 0, count: 48))
        try both.client.sendDatagram(Array(repeating: 0, count: 47))
        // The client accepts 100: 98 bytes would need 1 + 2 + 98 = 101.
        #expect(usage { try both.server.sendDatagram(Array(repeating: 0, count: 98)) } == .datagramTooLarge)
        #expect(both.server.maxDatagramPayload == 97)
        both.echo = false
        both.pump()
        #expect(both.serverDatagrams.count == 2)
        #expect(both.errors.isEmpty)
    }

    @Test func resetAndStopSendingAreSurfaced() throws {
        let pair = QMuxTestPair()
        pair.echo = false
        pair.pump()
        let stream = try pair.client.openBidirectionalStream()
        try pair.client.write(stream: stream, [1, 2, 3], fin: false)
        pair.pump()
        pair.client.resetStream(stream, code: 0x77)
        pair.pump()
        #expect(pair.serverEvents.contains(.streamReset(stream, code: 0x77)))
        #expect(pair.clientSent.contains(.resetStream(streamID: 0, errorCode: 0x77, finalSize: 3)))
        #expect(throws: QMuxError.self) { try pair.client.write(stream: stream, [4], fin: false) }

        // STOP_SENDING from the server: the client reports it and answers with RESET_STREAM (same code).
        let other = try pair.client.openBidirectionalStream()
        try pair.client.write(stream: other, [5], fin: false)
        pair.pump()
        pair.server.stopSending(other, code: 0x99)
        pair.pump()
        #expect(pair.clientEvents.contains(.stopSending(other, code: 0x99)))
        #expect(pair.clientSent.contains(.resetStream(streamID: 4, errorCode: 0x99, finalSize: 1)))
        #expect(throws: QMuxError.self) { try pair.client.write(stream: other, [6], fin: false) }
        #expect(pair.errors.isEmpty)
    }

    @Test func gracefulCloseCarriesCodeAndReason() throws {
        let pair = QMuxTestPair()
        pair.echo = false
        pair.pump()
        let stream = try pair.client.openBidirectionalStream()
        try pair.client.write(stream: stream, [1, 2], fin: true)
        pair.client.close(applicationError: 0x100, reason: "user left")
        #expect(pair.client.isClosed)
        pair.pump()
        // The data written before close arrives before the CONNECTION_CLOSE.
        #expect(pair.serverStreams[stream] == QMuxReceivedStream(bytes: [1, 2], fin: true))
        #expect(pair.serverEvents.last == .closed(.peerApplication(code: 0x100, reason: "user left")))
        #expect(pair.clientEvents.last == .closed(.localApplication(code: 0x100, reason: "user left")))
        #expect(pair.server.isClosed)
        #expect(pair.server.takeOutput().isEmpty)  // no draining, nothing sent back
        #expect(usage { _ = try pair.client.openBidirectionalStream() } == .connectionClosed)
    }

    @Test func idleTimeoutOnAVirtualClock() throws {
        let pair = QMuxTestPair(
            client: qmuxTestParameters(idleMilliseconds: 1000),
            server: qmuxTestParameters(idleMilliseconds: 500))
        pair.pump()
        let start = pair.now
        #expect(pair.client.nextTimeout == start + 500 * qmuxMillisecond)
        pair.client.handleTimeout(now: start + 399 * qmuxMillisecond)
        #expect(!pair.client.isClosed)
        // Traffic restarts the idle timer on both sides.
        pair.now = start + 400 * qmuxMillisecond
        try pair.client.sendDatagram([1])
        pair.pump()
        #expect(pair.client.nextTimeout == pair.now + 500 * qmuxMillisecond)
        #expect(pair.server.nextTimeout == pair.now + 500 * qmuxMillisecond)
        let lastTraffic = pair.now
        pair.run(until: lastTraffic + 10_000 * qmuxMillisecond)
        #expect(pair.clientEvents.last == .closed(.idleTimeout))
        #expect(pair.serverEvents.last == .closed(.idleTimeout))
        #expect(pair.client.closeReason == .idleTimeout)
        #expect(pair.client.takeOutput().isEmpty)  // silent close
        #expect(pair.client.nextTimeout == nil)
    }

    @Test func keepAliveQXPingKeepsAnIdleConnectionOpen() throws {
        let parameters = qmuxTestParameters(idleMilliseconds: 300)
        let pair = QMuxTestPair(client: parameters, server: parameters, keepAlive: 100 * qmuxMillisecond)
        pair.pump()
        pair.run(until: pair.now + 10_000 * qmuxMillisecond)
        #expect(!pair.client.isClosed && !pair.server.isClosed)
        let pings = pair.clientSent.filter { if case .ping = $0 { true } else { false } }
        let responses = (pair.clientSent + pair.serverSent).filter {
            if case .pingResponse = $0 { true } else { false }
        }
        #expect(pings.count >= 50)
        #expect(responses.count >= 50)
        // Sequence numbers increase and responses echo them.
        let sequences = pings.compactMap { if case .ping(let sequence) = $0 { sequence } else { nil } }
        #expect(sequences == sequences.sorted() && Set(sequences).count == sequences.count)
        #expect(pair.errors.isEmpty)

        // The link dies: the unanswered QX_PING ends the connection within keep-alive + idle timeout.
        pair.deliverToClient = false
        pair.deliverToServer = false
        let dead = pair.now
        pair.run(until: dead + 2000 * qmuxMillisecond)
        #expect(pair.client.closeReason == .idleTimeout)
        #expect(pair.server.closeReason == .idleTimeout)
    }

    @Test func applicationPingGetsPong() throws {
        let pair = QMuxTestPair()
        pair.pump()
        let first = try pair.client.ping()
        let second = try pair.client.ping()
        #expect(second > first)
        pair.pump()
        #expect(pair.clientEvents.contains(.pong(sequence: second)))
        #expect(pair.clientEvents.filter { if case .pong = $0 { true } else { false } }.count == 1)
    }

    /// Random operations on both sides with small windows: no protocol error ever, and every stream that was
    /// neither reset nor stopped is echoed intact.
    @Test func randomOperationsKeepBothSidesConsistent() throws {
        var random = SplitMix64(seed: 7)
        for round in 0..<40 {
            let small = QMuxTransportParameters(
                initialMaxData: 5000, initialMaxStreamDataBidiLocal: 1200,
                initialMaxStreamDataBidiRemote: 900, initialMaxStreamDataUni: 700,
                initialMaxStreamsBidi: 3, initialMaxStreamsUni: 2,
                maxDatagramFrameSize: 300)
            let pair = QMuxTestPair(client: small, server: small)
            pair.pump()
            var written: [Int64: [UInt8]] = [:]
            var finished: Set<Int64> = []
            var abandoned: Set<Int64> = []
            for _ in 0..<60 {
                switch random.next() % 8 {
                case 0, 1:
                    if let stream = try? pair.client.openBidirectionalStream() { written[stream] = [] }
                case 2, 3, 4:
                    let open = written.keys.filter { !finished.contains($0) && !abandoned.contains($0) }.sorted()
                    guard let stream = open.randomElement(using: &random) else { break }
                    let data = (0..<Int(random.next() % 3000)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
                    let fin = random.next() % 3 == 0
                    try pair.client.write(stream: stream, data, fin: fin)
                    written[stream, default: []] += data
                    if fin { finished.insert(stream) }
                case 5:
                    let size = Int(random.next() % 310)
                    try? pair.client.sendDatagram([UInt8](repeating: 1, count: size))
                case 6:
                    guard let stream = written.keys.sorted().randomElement(using: &random) else { break }
                    if random.next() % 2 == 0 {
                        pair.client.resetStream(stream, code: 1)
                    } else {
                        pair.client.stopSending(stream, code: 2)
                    }
                    abandoned.insert(stream)
                default:
                    pair.pump(rounds: Int(random.next() % 3) + 1)
                }
            }
            pair.pump()
            #expect(pair.errors.isEmpty, "round \(round): \(pair.errors)")
            #expect(!pair.client.isClosed && !pair.server.isClosed)
            for stream in finished.subtracting(abandoned) {
                #expect(
                    pair.clientStreams[stream] == QMuxReceivedStream(bytes: written[stream]!, fin: true),
                    "round \(round) stream \(stream)")
            }
        }
    }

    private func usage(_ body: () throws -> Void) -> QMuxUsageError? {
        do {
            try body()
            return nil
        } catch {
            return (error as? QMuxError)?.usage
        }
    }
}
