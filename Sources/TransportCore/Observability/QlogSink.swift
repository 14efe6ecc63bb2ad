/// Where one QUIC connection's qlog goes, as ngtcp2 produces it (JSON-SEQ: each record starts with 0x1E). The
/// layer above makes one per connection (TransportIO's `QlogFile` writes a file); the core never opens a file.
///
/// - Important: Used on the thread that owns the connection, from ngtcp2's callback: it must not block for long.
package protocol QlogSink: AnyObject {
    /// Takes one chunk from ngtcp2; `fin`: the log is complete (the connection is being freed).
    func write(_ chunk: UnsafeRawBufferPointer, fin: Bool)
    /// Makes what was written so far durable: the connection closed, and the process may exit before it is freed.
    func flush()
}

/// Makes the qlog sink of a new connection, given the original destination connection ID (which names the
/// connection's log) and whether the connection is a client's; nil: no qlog for this connection.
package typealias QlogSinkFactory = @Sendable (_ originalDCID: ConnectionID, _ isClient: Bool) -> (any QlogSink)?
