import PTTTransport
import TransportCore

/// Variable-length integers, message framing, and the two address parsers.
enum WireTargets {
    static func all() -> [ParserTarget] {
        [
            ParserTarget(name: "varint", seeds: ParserSeeds.varInts) { input, _ in ParserProbe.varInts(input) },
            ParserTarget(name: "message-framing", seeds: framingSeeds) { input, random in
                var decoder = MessageDecoder(maximumSize: random.oneIn(2) ? 1024 : MessageFraming.defaultMaximumSize)
                let cut = random.below(input.count + 1)
                do throws(TransportError) {
                    _ = try decoder.feed(input[..<cut])
                    _ = try decoder.feed(input[cut...])
                    try decoder.finish()
                    return .accepted
                } catch {
                    return .rejected(error.description)
                }
            },
            ParserTarget(name: "socket-address", seeds: addressSeeds) { input, random in
                let text = String(decoding: input, as: UTF8.self)
                // Half the inputs go to the host-only initializer (the text before the last colon).
                let host = text.lastIndex(of: ":").map { String(text[..<$0]) } ?? text
                let parsed =
                    random.oneIn(2)
                    ? SocketAddress(parsing: text)
                    : SocketAddress(host: host, port: UInt16(truncatingIfNeeded: random.next()))
                guard let parsed else { return .rejected("not a numeric HOST:PORT") }
                // What it prints must parse back to the same address.
                return SocketAddress(parsing: parsed.description) == parsed
                    ? .accepted
                    : .rejected("\(parsed) does not parse back")
            },
            ParserTarget(name: "server-address", seeds: addressSeeds) { input, _ in
                guard let address = ServerAddress(String(decoding: input, as: UTF8.self)) else {
                    return .rejected("not HOST:PORT")
                }
                return ServerAddress(address.description) != nil ? .accepted : .rejected("does not parse back")
            },
        ]
    }

    /// Several framed messages back to back, an empty one, and one at a varint length boundary.
    static var framingSeeds: [[UInt8]] {
        [
            MessageFraming.frame(Array("hello".utf8)) + MessageFraming.frame([]) + MessageFraming.frame([1, 2, 3]),
            MessageFraming.frame([UInt8](repeating: 0x61, count: 64)),
            MessageFraming.frame([UInt8](repeating: 0x62, count: 300)),
        ]
    }

    static let addressSeeds: [[UInt8]] = [
        "127.0.0.1:4433", "[::1]:4433", "0.0.0.0:0", "255.255.255.255:65535",
        "[::ffff:127.0.0.1]:80", "[fe80::1]:1", "relay.example:443", "::1",
    ]
    .map { Array($0.utf8) }
}
