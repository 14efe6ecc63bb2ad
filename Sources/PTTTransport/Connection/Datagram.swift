/// One received audio datagram.
public struct Datagram: Hashable, Sendable {
    /// The payload exactly as sent.
    public var payload: [UInt8]
    /// True when it arrived in 0-RTT: early data, which the TLS handshake does not protect from replay (a server
    /// holds such datagrams until the handshake completed; see <doc:WakingASuspendedClient>).
    public var isEarly: Bool

    /// A datagram carrying `payload`; `isEarly` marks one that arrived in 0-RTT.
    public init(payload: [UInt8], isEarly: Bool = false) {
        self.payload = payload
        self.isEarly = isEarly
    }
}

/// One control message received on a stream.
public struct Message: Hashable, Sendable {
    /// The message bytes, without the length prefix.
    public var bytes: [UInt8]
    /// True when any of its bytes arrived in 0-RTT.
    public var isEarly: Bool

    /// A message carrying `bytes`; `isEarly` marks one that arrived (in part) in 0-RTT.
    public init(bytes: [UInt8], isEarly: Bool = false) {
        self.bytes = bytes
        self.isEarly = isEarly
    }
}

/// A chunk of bytes received on a stream (the byte-level API).
public struct StreamChunk: Hashable, Sendable {
    /// The bytes, in stream order.
    public var bytes: [UInt8]
    /// True when these bytes arrived in 0-RTT.
    public var isEarly: Bool
}
