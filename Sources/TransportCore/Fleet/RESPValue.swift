/// A RESP2 value, the Redis serialization protocol (the types Redis 7.0 and Valkey send to a RESP2 client).
package enum RESPValue: Hashable, Sendable {
    /// `+OK\r\n`: a status line.
    case simpleString(String)
    /// `-ERR message\r\n`: the server refused the command; the text starts with an error kind (`ERR`, `OOM`, ...).
    case error(String)
    /// `:1\r\n`.
    case integer(Int64)
    /// `$3\r\nfoo\r\n`; nil is the null bulk string `$-1\r\n` (e.g. `SET ... NX` on a key that exists).
    case bulk([UInt8]?)
    /// `*2\r\n...`; nil is the null array `*-1\r\n`.
    case array([RESPValue]?)

    /// The bytes of a command as a client sends it: an array of bulk strings.
    package static func command(_ arguments: [String]) -> [UInt8] {
        var bytes = Array("*\(arguments.count)\r\n".utf8)
        for argument in arguments {
            let utf8 = Array(argument.utf8)
            bytes += Array("$\(utf8.count)\r\n".utf8)
            bytes += utf8
            bytes += [0x0D, 0x0A]
        }
        return bytes
    }

    /// This value's RESP2 bytes (what a server sends).
    package var encoded: [UInt8] {
        func line(_ prefix: Character, _ text: String) -> [UInt8] { Array("\(prefix)\(text)\r\n".utf8) }
        switch self {
        case .simpleString(let text): return line("+", text)
        case .error(let text): return line("-", text)
        case .integer(let value): return line(":", String(value))
        case .bulk(nil): return line("$", "-1")
        case .bulk(let bytes?): return line("$", String(bytes.count)) + bytes + [0x0D, 0x0A]
        case .array(nil): return line("*", "-1")
        case .array(let items?): return items.reduce(line("*", String(items.count))) { $0 + $1.encoded }
        }
    }
}

/// Why bytes from a Redis server are not RESP2 (the connection is then unusable: close it).
package struct RESPError: Error, Equatable, CustomStringConvertible {
    package let description: String

    package init(_ description: String) { self.description = description }
}
