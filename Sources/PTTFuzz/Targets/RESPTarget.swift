import TransportCore

/// The RESP2 decoder the relay's Redis client reads replies with, fed each input in random pieces, with the
/// client's bounds or the defaults: a typed `RESPError` or whole values, never a trap, and never more held than it
/// was given.
enum RESPTarget {
    static func make() -> ParserTarget {
        ParserTarget(name: "resp-replies", seeds: RedisClientTarget.seeds(nowMilliseconds: 1_795_000_000_000)) {
            input, random in
            var decoder =
                random.oneIn(2) ? RESPDecoder(maxValueBytes: 4096, maxArrayCount: 16, maxDepth: 2) : RESPDecoder()
            var offset = 0
            var values = 0
            do throws(RESPError) {
                while offset < input.count {
                    let end = min(input.count, offset + 1 + random.below(64))
                    decoder.append(input[offset..<end])
                    offset = end
                    while try decoder.next() != nil { values += 1 }
                    if decoder.bufferedBytes > input.count { return .rejected("held more bytes than it was given") }
                }
            } catch {
                return .rejected(error.description)
            }
            return values > 0 ? .accepted : .rejected("no whole value")
        }
    }
}
