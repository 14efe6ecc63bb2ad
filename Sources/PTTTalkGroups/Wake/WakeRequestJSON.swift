import TransportCore

/// The wake hook's JSON (`ExecWakeSender.json(_:)`), written directly: one pass over the request's fields into a
/// byte buffer, keys sorted. Byte for byte what `JSONSerialization` with `.sortedKeys` writes for the same object
/// (`WakeRequestJSONTests` compares them), at a small fraction of its cost: for 1,000 members the object graph of
/// dictionaries and its serialization took tens of milliseconds of the 50 the issue allows from the floor request
/// to the hook.
enum WakeRequestJSON {
    static func encode(_ request: WakeRequest) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(160 + request.members.count * 96)
        out += Array(#"{"burst":"#.utf8)
        string(Hex.string(BurstBuffer.bytes(of: request.burst)), into: &out)
        out += Array(#","group":"#.utf8)
        string(request.group, into: &out)
        if request.isLateAddition { out += Array(#","late":true"#.utf8) }
        out += Array(#","members":["#.utf8)
        for (index, member) in request.members.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            out.append(UInt8(ascii: "{"))
            if let lastRelay = member.lastRelay {
                out += Array(#""last_relay":"#.utf8)
                string(lastRelay, into: &out)
                out.append(UInt8(ascii: ","))
            }
            out += Array(#""platform":"#.utf8)
            string(member.address.platform.description, into: &out)
            out += Array(#","push_token":"#.utf8)
            string(member.address.token, into: &out)
            out += Array(#","user":"#.utf8)
            string(member.identity.user, into: &out)
            out.append(UInt8(ascii: "}"))
        }
        out += Array(#"],"relay":{"port":"#.utf8)
        out += Array(String(request.relay.port).utf8)
        if let id = request.relay.quicLBServerID {
            out += Array(#","quic_lb_server_id":"#.utf8)
            string(Hex.string(id), into: &out)
        }
        out += Array(#","server_name":"#.utf8)
        string(request.relay.serverName, into: &out)
        out += Array(#"},"talker":"#.utf8)
        string(request.talker.user, into: &out)
        out += Array(#","ticket":"#.utf8)
        string(request.ticket.base64URL, into: &out)
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// `text` as a JSON string, escaped as `JSONSerialization` escapes it: `"`, `\` and `/` with a backslash, the
    /// control characters with their short escapes or `\u00XX`, everything else as UTF-8.
    static func string(_ text: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"):
                out += [UInt8(ascii: "\\"), byte]
            case 0x08: out += Array(#"\b"#.utf8)
            case 0x0C: out += Array(#"\f"#.utf8)
            case 0x0A: out += Array(#"\n"#.utf8)
            case 0x0D: out += Array(#"\r"#.utf8)
            case 0x09: out += Array(#"\t"#.utf8)
            case 0..<0x20:
                let digits = Array("0123456789abcdef".utf8)
                out += Array(#"\u00"#.utf8) + [digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]]
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}
