extension QUICLBConfiguration {
    /// The configuration written `cr=N,server-id=HEX,nonce-len=M[,key=HEX32][,encode-len]` (the form of
    /// `ptt-transport serve --quic-lb`): decimal config rotation and nonce length, the server ID and the optional
    /// 16-byte key in hexadecimal, and `encode-len` to put the length in the first octet.
    ///
    /// - Throws: `TransportError.Code.invalidConfiguration` naming the field that is unknown, repeated, missing,
    ///   not a number or not hexadecimal, or out of range (see `init(configRotation:serverID:nonceLength:key:encodesLength:)`).
    public init(parsing text: String) throws(TransportError) {
        var fields: [Substring: Substring] = [:]
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            let pair = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = pair[0]
            guard ["cr", "server-id", "nonce-len", "key", "encode-len"].contains(name), fields[name] == nil,
                (pair.count == 1) == (name == "encode-len")
            else {
                throw Self.parseFailure("unknown, repeated or malformed field \"\(part)\"")
            }
            fields[name] = pair.count == 2 ? pair[1] : ""
        }
        guard let cr = fields["cr"], let serverID = fields["server-id"], let nonceLength = fields["nonce-len"] else {
            throw Self.parseFailure("cr, server-id and nonce-len are required")
        }
        guard let configRotation = Int(cr), let nonce = Int(nonceLength) else {
            throw Self.parseFailure("cr=\(cr) and nonce-len=\(nonceLength) must be decimal numbers")
        }
        guard let serverIDBytes = Hex.bytes(serverID) else {
            throw Self.parseFailure("server-id=\(serverID) is not hexadecimal (two digits a byte)")
        }
        var key: [UInt8]?
        if let keyText = fields["key"] {
            guard let bytes = Hex.bytes(keyText) else {
                throw Self.parseFailure("the key is not hexadecimal (32 digits for 16 bytes)")
            }
            key = bytes
        }
        try self.init(
            configRotation: configRotation, serverID: serverIDBytes, nonceLength: nonce, key: key,
            encodesLength: fields["encode-len"] != nil)
    }

    private static func parseFailure(_ why: String) -> TransportError {
        TransportError(
            .invalidConfiguration,
            "\(why); a QUIC-LB configuration is cr=N,server-id=HEX,nonce-len=M[,key=HEX32][,encode-len]")
    }
}
