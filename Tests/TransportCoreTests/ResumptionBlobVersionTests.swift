import Testing

@testable import TransportCore

/// The QUIC version in saved resumption state: v2 round-trips, state without the field (every blob written before
/// it existed, and every v1 blob now) means v1, and a codepoint that is neither is a typed error.
@Suite("Resumption blob: the QUIC version")
struct ResumptionBlobVersionTests {
    /// The blob's bytes with the value of its last field (the version, written last) replaced by `value` as an
    /// 8-byte varint, checksum recomputed.
    static func withVersionValue(_ blob: ResumptionBlob, _ value: UInt64) -> [UInt8] {
        var body = Array(blob.encoded().dropLast(4))
        body.removeLast(8)
        body += (0..<8).reversed().map { UInt8(truncatingIfNeeded: value >> (8 * UInt64($0))) | ($0 == 7 ? 0xc0 : 0) }
        let checksum = ResumptionBlob.fnv1a(body)
        return body + [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: checksum >> UInt32($0)) }
    }

    @Test func aV2BlobRoundTripsAndAV1BlobIsWrittenAsBefore() throws {
        var blob = ResumptionBlobTests.sample()
        #expect(blob.quicVersion == LinkedNgtcp2.quicVersion1)
        let v1Bytes = blob.encoded()
        blob.quicVersion = LinkedNgtcp2.quicVersion2
        let v2Bytes = blob.encoded()
        #expect(try ResumptionBlob(decoding: v2Bytes).quicVersion == LinkedNgtcp2.quicVersion2)
        #expect(try ResumptionBlob(decoding: v2Bytes) == blob)
        // v1 leaves the field out: the bytes are those of a blob from before the field, which decode as v1.
        #expect(v2Bytes.count == v1Bytes.count + 1 + 1 + 8)
        #expect(Array(v2Bytes.prefix(v1Bytes.count - 4)) == Array(v1Bytes.dropLast(4)))
        #expect(try ResumptionBlob(decoding: v1Bytes).quicVersion == LinkedNgtcp2.quicVersion1)
    }

    @Test func aVersionThatIsNeitherV1NorV2IsATypedError() throws {
        var blob = ResumptionBlobTests.sample()
        blob.quicVersion = LinkedNgtcp2.quicVersion2
        #expect(try ResumptionBlob(decoding: Self.withVersionValue(blob, UInt64(LinkedNgtcp2.quicVersion2))) == blob)
        for bad: UInt64 in [0, 3, 0xff00_001d, 1 << 40] {
            let error = #expect(throws: TransportError.self) {
                try ResumptionBlob(decoding: Self.withVersionValue(blob, bad))
            }
            #expect(error?.code == .resumptionStateUnusable)
            #expect(error?.message.contains("neither v1 nor v2") == true, "\(error!)")
        }
    }
}
