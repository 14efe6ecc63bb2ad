import CNgtcp2
import Testing

@testable import TransportCore

/// Connection IDs are stored inline (16 + 4 bytes) and handed to ngtcp2 as its own struct: every length from 0 to 20
/// survives the round trip, including the ones that cross into the 4-byte tail.
@Suite("Connection IDs round-trip through ngtcp2's struct")
struct ConnectionIDTests {
    @Test(arguments: [0, 1, 8, 15, 16, 17, 19, 20])
    func anIDOfEveryLengthRoundTrips(length: Int) {
        let bytes = (0..<length).map { UInt8(0xa0 &+ $0) }
        let id = ConnectionID(bytes)
        let cid = id.ngtcp2
        #expect(cid.datalen == length)
        let stored = withUnsafeBytes(of: cid.data) { Array($0.prefix(length)) }
        #expect(stored == bytes)
        #expect(ConnectionID(cid) == id && ConnectionID(cid).bytes == bytes)
    }
}
