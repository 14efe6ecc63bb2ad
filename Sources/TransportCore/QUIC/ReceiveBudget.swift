/// The receive memory a peer can make one connection hold, and the flow-control windows it is derived from.
///
/// ngtcp2 0.12.1 keeps out-of-order STREAM data in 8 KiB chunks: a 1-byte frame at any offset allocates the whole
/// chunk, and nothing is released until the bytes before it arrive. A peer that sends one byte every 4 KiB and
/// never the byte at offset 0 therefore pins the whole connection window in chunks, and more on every stream it
/// opens that way: one chunk plus the stream's two reassembly indexes, which ngtcp2 allocates eight blocks at a
/// time (about 18 KiB per stream measured, for a byte or two of connection credit). So the windows follow the
/// largest message instead of fixed megabytes, and never grow:
/// - a stream's window holds one largest framed message, so a message never waits for a window update;
/// - the connection's window is the same: one largest message in flight at once (a reader that takes the bytes
///   as they come, as the relay does, keeps renewing it).
///
/// What one connection can pin is then at most the connection window, rounded up to chunks, plus `perStreamCost`
/// for every stream it may have open (`pinnableBytes`): 72 KiB + 4 × 18 KiB = 144 KiB with the server defaults
/// (64 KiB messages, 4 streams), before the connection's own state (about 100 KiB: TLS, ngtcp2, buffers).
package struct ReceiveBudget: Sendable, Hashable {
    /// ngtcp2 0.12.1's reassembly chunk (`ngtcp2_rob`, 8 KiB).
    package static let reassemblyChunk: UInt64 = 8 * 1024
    /// What one stream holding a single out-of-order byte costs the relay with ngtcp2 0.12.1: its chunk and its
    /// reassembly indexes (17.7 KiB measured with `Tests/Peers/quic_reassembly_pinner.py`, rounded up).
    package static let perStreamCost: UInt64 = 18 * 1024

    /// The receive window of each stream: the largest message with its length prefix.
    package let streamWindow: UInt64
    /// The receive window of the connection: one largest message, as a stream's.
    package let connectionWindow: UInt64
    /// How many streams the peer may have open at once.
    package let streams: UInt64

    /// The budget for messages up to `maximumMessageSize` bytes on up to `streams` concurrent streams.
    package init(maximumMessageSize: Int, streams: Int) {
        let largest = UInt64(max(1, maximumMessageSize))
        streamWindow = largest + UInt64(VarInt.encodedLength(largest))
        connectionWindow = streamWindow
        self.streams = UInt64(max(1, streams))
    }

    /// The most reassembly memory a peer can pin on one connection: every chunk the connection window spans, plus
    /// `perStreamCost` on every stream.
    package var pinnableBytes: UInt64 {
        let chunk = Self.reassemblyChunk
        return (connectionWindow + chunk - 1) / chunk * chunk + streams * Self.perStreamCost
    }
}

extension QUICParameters {
    /// Sets the receive windows and the stream limit from `budget`, and stops ngtcp2 from growing the windows
    /// beyond them (its auto-tuning would otherwise let a fast reader raise them fourfold first).
    package mutating func apply(_ budget: ReceiveBudget) {
        initialMaxStreamData = budget.streamWindow
        initialMaxData = budget.connectionWindow
        maxBidirectionalStreams = budget.streams
        windowGrowth = 1
    }
}
