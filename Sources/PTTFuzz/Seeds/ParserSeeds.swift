import TransportCore

/// Valid inputs for the `ParserProbe` entry points, built by the core's own encoders: where a fuzzer's mutations
/// start from. Every value here parses (the fuzz tests check it).
package enum ParserSeeds {
    /// One encoding of each QMux frame kind the encoder writes.
    package static var qmuxFrames: [[UInt8]] {
        frames.map(\.encoded)
    }

    /// Records: each frame on its own, then all control frames in one record.
    package static var qmuxRecords: [[UInt8]] {
        var seeds = frames.map { frame in
            var out: [UInt8] = []
            QMuxRecord.encode(frames: frame.encoded, into: &out)
            return out
        }
        var all: [UInt8] = []
        QMuxRecord.encode(frames: frames.flatMap(\.encoded), into: &all)
        seeds.append(all)
        return seeds
    }

    /// QX_TRANSPORT_PARAMETERS payloads: the probe's parameters, every field set, and max_record_size raised.
    package static var qmuxTransportParameters: [[UInt8]] {
        [
            ParserProbe.probeParameters.encode(), allParameters.encode(),
            QMuxTransportParameters(maxRecordSize: 1 << 20).encode(),
        ]
    }

    /// Variable-length integers at every length boundary (RFC 9000 §16), one value per seed.
    package static var varInts: [[UInt8]] {
        varIntBoundaries.map { value in
            var out: [UInt8] = []
            VarInt.encode(value, into: &out)
            return out
        }
    }

    /// Values on both sides of each varint length boundary, and the largest.
    package static let varIntBoundaries: [UInt64] = [
        0, 1, 63, 64, 16_383, 16_384, (1 << 30) - 1, 1 << 30,
        VarInt.max - 1, VarInt.max,
    ]

    /// A conversation between a QMux client and server: the client's bytes (to feed a server) and the server's
    /// (to feed a client). The client opens two streams, sends messages, a datagram, a ping, resets one stream,
    /// and closes.
    package static var qmuxConversation: (clientToServer: [UInt8], serverToClient: [UInt8]) {
        let parameters = ParserProbe.probeParameters
        let client = QMuxConnection(role: .client, localParameters: parameters, now: 1_000_000)
        let server = QMuxConnection(role: .server, localParameters: parameters, now: 1_000_000)
        var toServer: [UInt8] = []
        var toClient: [UInt8] = []
        var now: UInt64 = 1_000_000
        func exchange() {
            for _ in 0..<3 {
                now += 1_000
                let fromClient = client.takeOutput(now: now)
                toServer += fromClient
                try? server.receive(fromClient, now: now)
                while let event = server.nextEvent() {
                    if case .streamData(let stream, let data, let fin) = event {
                        server.consumed(stream: stream, bytes: data.count)
                        try? server.write(stream: stream, data, fin: fin)
                    }
                }
                let fromServer = server.takeOutput(now: now)
                toClient += fromServer
                try? client.receive(fromServer, now: now)
                while client.nextEvent() != nil {}
            }
        }
        exchange()
        if let first = try? client.openBidirectionalStream(), let second = try? client.openBidirectionalStream() {
            try? client.write(stream: first, Array("push to talk".utf8), fin: false)
            try? client.write(stream: second, [UInt8](repeating: 0x41, count: 300), fin: true)
            try? client.sendDatagram([UInt8](repeating: 0x5a, count: 80))
            _ = try? client.ping()
            exchange()
            client.stopSending(first, code: 7)
            client.resetStream(first, code: 9)
            exchange()
        }
        client.close(applicationError: 0, reason: "bye")
        exchange()
        return (toServer, toClient)
    }

    private static let allParameters = QMuxTransportParameters(
        maxIdleTimeout: 10_000, initialMaxData: 1 << 24, initialMaxStreamDataBidiLocal: 1 << 16,
        initialMaxStreamDataBidiRemote: 1 << 17, initialMaxStreamDataUni: 1 << 15, initialMaxStreamsBidi: 100,
        initialMaxStreamsUni: 3, maxDatagramFrameSize: 65_535, maxRecordSize: 16_383)

    private static var frames: [QMuxFrame] {
        [
            .padding(count: 3), .resetStream(streamID: 4, errorCode: 1, finalSize: 100),
            .stopSending(streamID: 0, errorCode: 2),
            .stream(streamID: 0, offset: 0, data: Array("hello".utf8), fin: false),
            .stream(streamID: 8, offset: 16_384, data: [1, 2, 3], fin: true), .maxData(1 << 20),
            .maxStreamData(streamID: 0, maximum: 65_536), .maxStreams(bidirectional: true, maximum: 100),
            .maxStreams(bidirectional: false, maximum: 1 << 60), .dataBlocked(limit: 1000),
            .streamDataBlocked(streamID: 4, limit: 500), .streamsBlocked(bidirectional: false, limit: 3),
            .connectionClose(errorCode: 0x0a, frameType: 0x08, reason: "protocol violation"),
            .connectionClose(errorCode: 42, frameType: nil, reason: ""), .datagram([0xde, 0xad, 0xbe, 0xef]),
            .transportParameters(allParameters), .ping(sequence: 1), .pingResponse(sequence: VarInt.max),
        ]
    }
}
