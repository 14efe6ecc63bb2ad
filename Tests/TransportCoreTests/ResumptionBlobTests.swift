import Testing

@testable import TransportCore

@Suite("Resumption blob codec")
struct ResumptionBlobTests {
    static func sample() -> ResumptionBlob {
        var blob = ResumptionBlob()
        blob.host = "relay.example"
        blob.port = 4433
        blob.alpn = "ptt/1"
        blob.lastTransport = "quic"
        blob.createdAt = 1_790_000_000
        blob.expiresAt = 1_790_604_800
        blob.quicTicket = Array(repeating: 0xab, count: 300)
        blob.quicTransportParameters = [1, 2, 3]
        blob.quicToken = [4, 5]
        blob.smoothedRTT = 48_000_000
        blob.tcpTicket = [6]
        blob.tcpTransportParameters = [7, 8]
        return blob
    }

    @Test func roundTrips() throws {
        let blob = Self.sample()
        #expect(try ResumptionBlob(decoding: blob.encoded()) == blob)
    }

    @Test func everyTruncationIsAClearError() {
        let bytes = Self.sample().encoded()
        for length in 0..<bytes.count {
            #expect(throws: TransportError.self) { try ResumptionBlob(decoding: Array(bytes.prefix(length))) }
        }
    }

    @Test func everySingleBitFlipIsDetected() {
        let bytes = Self.sample().encoded()
        for index in 0..<bytes.count {
            var corrupted = bytes
            corrupted[index] ^= 0x10
            #expect(throws: TransportError.self) { try ResumptionBlob(decoding: corrupted) }
        }
    }

    @Test func foreignAndFutureBlobsAreRefusedWithReasons() {
        do {
            _ = try ResumptionBlob(decoding: Array("not a resumption state at all".utf8))
            Issue.record("garbage decoded")
        } catch {
            #expect(error.code == .resumptionStateUnusable)
            #expect(error.message.contains("magic"))
        }
        var future = Self.sample().encoded()
        future[4] = 9
        do {
            _ = try ResumptionBlob(decoding: future)
            Issue.record("future version decoded")
        } catch {
            #expect(error.message.contains("version 9"))
        }
    }

    @Test func seededRandomInputNeverTraps() {
        var state: UInt64 = 42
        func next() -> UInt8 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return UInt8(truncatingIfNeeded: state >> 33)
        }
        for round in 0..<5000 {
            var bytes = (round % 2 == 0) ? Self.sample().encoded() : ResumptionBlob.magic + [1]
            let extra = Int(next() % 40)
            for _ in 0..<extra { bytes.append(next()) }
            if !bytes.isEmpty { bytes[Int(next()) % bytes.count] = next() }
            _ = try? ResumptionBlob(decoding: bytes)
        }
    }
}
