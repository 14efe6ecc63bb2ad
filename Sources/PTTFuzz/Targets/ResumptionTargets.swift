import PTTTransport
import TransportCore

/// Saved resumption state: the core's blob decoder and the public `ResumptionState(serialized:)`.
enum ResumptionTargets {
    /// `captured`: serialized states a real connection produced (may be empty).
    static func all(captured: [[UInt8]]) -> [ParserTarget] {
        let seeds = blobSeeds + captured
        return [
            ParserTarget(name: "resumption-blob", seeds: seeds) { input, random in
                let bytes = random.oneIn(2) ? withValidChecksum(input) : input
                do throws(TransportError) {
                    let blob = try ResumptionBlob(decoding: bytes)
                    _ = try ResumptionBlob(decoding: blob.encoded())  // what decodes must re-encode and decode
                    return .accepted
                } catch {
                    return .rejected(error.description)
                }
            },
            ParserTarget(name: "resumption-state", seeds: seeds) { input, random in
                let bytes = random.oneIn(2) ? withValidChecksum(input) : input
                do {
                    let state = try ResumptionState(serialized: bytes)
                    _ = (state.host, state.port, state.expiresAt, state.lastPath, state.smoothedRTT)
                    return .accepted
                } catch {
                    return .rejected("\(error)")
                }
            },
        ]
    }

    /// Blobs the encoder writes: a QUIC-only state, a TCP state with QMux parameters, a minimal one.
    static var blobSeeds: [[UInt8]] {
        var quic = ResumptionBlob()
        quic.host = "127.0.0.1"
        quic.port = 4433
        quic.alpn = "ptt/1"
        quic.createdAt = 1_790_000_000
        quic.expiresAt = 1_790_604_800
        quic.quicTicket = Array(0..<200)
        quic.quicTransportParameters = [0x04, 0x04, 0x80, 0x10, 0x00, 0x00]
        quic.quicToken = Array(repeating: 0x7a, count: 40)
        quic.smoothedRTT = 25_000_000
        var tcp = quic
        tcp.lastTransport = "tcp"
        tcp.tcpTicket = Array(repeating: 0x11, count: 120)
        tcp.tcpTransportParameters = ParserSeeds.qmuxTransportParameters[0]
        var minimal = ResumptionBlob()
        minimal.host = "::1"
        minimal.port = 1
        minimal.alpn = "a"
        return [quic.encoded(), tcp.encoded(), minimal.encoded()]
    }

    /// `bytes` with its last four bytes replaced by the FNV-1a checksum of the rest, so mutations get past the
    /// corruption check into the field decoder.
    static func withValidChecksum(_ bytes: [UInt8]) -> [UInt8] {
        guard bytes.count >= 4 else { return bytes }
        var hash: UInt32 = 0x811c_9dc5
        for byte in bytes.dropLast(4) {
            hash ^= UInt32(byte)
            hash = hash &* 0x0100_0193
        }
        return bytes.dropLast(4) + [
            UInt8(hash >> 24), UInt8((hash >> 16) & 0xff), UInt8((hash >> 8) & 0xff),
            UInt8(hash & 0xff),
        ]
    }
}
