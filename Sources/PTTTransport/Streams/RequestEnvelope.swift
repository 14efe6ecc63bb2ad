import TransportCore

/// One message on a request stream (`RequestChannel`): the request ID, then the body. A request carries the ID its
/// channel gave it; the reply carries the ID of the request it answers, so replies never need to come in order and
/// a stray reply can never be taken for the answer to another request.
///
/// On the wire: a QUIC variable-length integer (RFC 9000 §16), the ID, then the body's bytes — all inside one
/// length-prefixed control message. A replier answers with `reply(_:)`:
///
/// ```swift
/// for try await message in stream.messages {
///     let request = try RequestEnvelope(decoding: message.bytes)
///     try await stream.send(request.reply(Array("granted".utf8)).encoded)
/// }
/// ```
public struct RequestEnvelope: Hashable, Sendable {
    /// The request ID (the channel numbers its requests 0, 1, 2, ...).
    public var id: UInt64
    /// The application's bytes.
    public var body: [UInt8]

    /// An envelope; `id` must be below 2^62 (a QUIC variable-length integer).
    public init(id: UInt64, body: [UInt8]) {
        self.id = min(id, VarInt.max)
        self.body = body
    }

    /// Decodes a message of a request stream.
    ///
    /// - Throws: `requestMalformed` for a message that does not start with a whole request ID (an empty message,
    ///   or one cut inside the integer).
    public init(decoding message: [UInt8]) throws(TransportError) {
        guard let (id, length) = VarInt.decode(message, at: 0) else {
            throw TransportError(
                .requestMalformed,
                "a \(message.count)-byte message on a request stream does not start with a request ID: the peer must "
                    + "send each request and reply as a variable-length request ID, then the body (WireFormats)")
        }
        self.id = id
        self.body = Array(message[length...])
    }

    /// The message to send: the ID, then the body.
    public var encoded: [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(8 + body.count)
        VarInt.encode(id, into: &bytes)
        bytes += body
        return bytes
    }

    /// The reply to this request: `body` under this request's ID.
    public func reply(_ body: [UInt8]) -> RequestEnvelope {
        RequestEnvelope(id: id, body: body)
    }
}
