import PTTTransport

/// `serve --quic-lb cr=N,server-id=HEX,nonce-len=M[,key=HEX32][,encode-len]`: the relay's QUIC-LB configuration.
enum QUICLBArgument {
    /// The configuration `text` describes; a usage error naming the bad part otherwise.
    static func parse(_ text: String) throws -> QUICLBConfiguration {
        var fields: [String: String] = [:]
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            let pair = part.split(separator: "=", maxSplits: 1).map(String.init)
            guard let name = pair.first, ["cr", "server-id", "nonce-len", "key", "encode-len"].contains(name),
                fields[name] == nil
            else {
                throw failure(text, "unknown or repeated field \(part)")
            }
            fields[name] = pair.count == 2 ? pair[1] : ""
        }
        guard let cr = fields["cr"].flatMap({ Int($0) }), let serverID = fields["server-id"].flatMap(hex),
            let nonceLength = fields["nonce-len"].flatMap({ Int($0) })
        else {
            throw failure(text, "cr=N, server-id=HEX and nonce-len=M are required (decimal N, M; HEX in pairs)")
        }
        var key: [UInt8]?
        if let keyText = fields["key"] {
            guard let bytes = hex(keyText) else { throw failure(text, "key=\(keyText) is not hexadecimal") }
            key = bytes
        }
        do {
            return try QUICLBConfiguration(
                configRotation: cr, serverID: serverID, nonceLength: nonceLength, key: key,
                encodesLength: fields["encode-len"] != nil)
        } catch {
            throw failure(text, error.message)
        }
    }

    private static func failure(_ text: String, _ why: String) -> Arguments.Failure {
        Arguments.Failure(
            description: "--quic-lb \(text): \(why); expected cr=N,server-id=HEX,nonce-len=M[,key=HEX32][,encode-len]")
    }

    /// The bytes of an even-length hexadecimal string, or nil.
    private static func hex(_ text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard !digits.isEmpty, digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let byte = UInt8(String(decoding: digits[index...index + 1], as: UTF8.self), radix: 16) else {
                return nil
            }
            bytes.append(byte)
        }
        return bytes
    }
}
