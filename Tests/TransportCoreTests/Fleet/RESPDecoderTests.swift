import Testing

@testable import TransportCore

/// The RESP2 codec on the bytes Redis 7.0 really sends (captured from `redis-server` 7.0.15 with `nc`): replies
/// to `SET k 1 NX PX 1000` (first and second time), `GET` of a missing key, `INCR`, an unknown command, `OOM`,
/// and an `INFO replication` bulk.
@Suite("RESP2 codec")
struct RESPDecoderTests {
    static let captured: [(bytes: String, value: RESPValue)] = [
        ("+OK\r\n", .simpleString("OK")),
        ("$-1\r\n", .bulk(nil)),
        (":1\r\n", .integer(1)),
        (":-42\r\n", .integer(-42)),
        (
            "-ERR unknown command 'NOPE', with args beginning with: \r\n",
            .error("ERR unknown command 'NOPE', with args beginning with: ")
        ),
        (
            "-OOM command not allowed when used memory > 'maxmemory'.\r\n",
            .error("OOM command not allowed when used memory > 'maxmemory'.")
        ),
        ("$0\r\n\r\n", .bulk([])),
        ("$5\r\nhello\r\n", .bulk(Array("hello".utf8))),
        ("*2\r\n$3\r\nfoo\r\n:7\r\n", .array([.bulk(Array("foo".utf8)), .integer(7)])),
        ("*-1\r\n", .array(nil)),
        ("*0\r\n", .array([])),
        ("*2\r\n*1\r\n+OK\r\n$-1\r\n", .array([.array([.simpleString("OK")]), .bulk(nil)])),
    ]

    @Test func decodesEachCapturedReply() throws {
        for (text, value) in Self.captured {
            var decoder = RESPDecoder()
            decoder.append(Array(text.utf8))
            #expect(try decoder.next() == value, "\(text.debugDescription)")
            #expect(try decoder.next() == nil)
            #expect(decoder.pendingBytes == 0)
        }
    }

    /// Every reply cut at every position: nothing comes out until the last byte, then exactly the value.
    @Test func decodesRepliesSplitAnywhere() throws {
        for (text, value) in Self.captured {
            let bytes = Array(text.utf8)
            for cut in 1..<bytes.count {
                var decoder = RESPDecoder()
                decoder.append(bytes[..<cut])
                #expect(try decoder.next() == nil, "\(text.debugDescription) cut at \(cut)")
                decoder.append(bytes[cut...])
                #expect(try decoder.next() == value, "\(text.debugDescription) cut at \(cut)")
            }
        }
    }

    /// Replies pipelined in one read, fed one byte at a time: they come out in order.
    @Test func decodesPipelinedRepliesByteByByte() throws {
        var decoder = RESPDecoder()
        var decoded: [RESPValue] = []
        for byte in Self.captured.flatMap({ Array($0.bytes.utf8) }) {
            decoder.append([byte])
            while let value = try decoder.next() { decoded.append(value) }
        }
        #expect(decoded == Self.captured.map(\.value))
    }

    @Test func encodingRoundTrips() throws {
        for (text, value) in Self.captured { #expect(value.encoded == Array(text.utf8)) }
        #expect(
            RESPValue.command(["SET", "k", "1", "NX", "PX", "1000"])
                == Array("*6\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\n1\r\n$2\r\nNX\r\n$2\r\nPX\r\n$4\r\n1000\r\n".utf8))
    }

    /// Bad input is a typed error, and limits hold before anything is allocated.
    @Test(arguments: [
        "?what\r\n", ":12a\r\n", "$5\r\nhello!!\r\n", "+OK\n", "$-2\r\n", "*-5\r\n", "$99999999999\r\n",
        "*100000\r\n", String(repeating: "*1\r\n", count: 20) + "+OK\r\n",
        "+" + String(repeating: "a", count: 5000),
    ])
    func refusesMalformedReplies(text: String) {
        var decoder = RESPDecoder()
        decoder.append(Array(text.utf8))
        #expect(throws: RESPError.self, "\(text.prefix(40).debugDescription)") { _ = try decoder.next() }
    }
}
