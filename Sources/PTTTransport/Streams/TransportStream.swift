import TransportCore

/// A bidirectional stream: reliable, ordered bytes, with a message API (varint length prefix) on top.
///
/// The stream's receive buffer and message decoder belong to the stream itself, shared by every `TransportStream`
/// value with this `id` and every loop that reads it: each message (or byte) is delivered exactly once, whichever
/// loop reads it, and a cancelled read leaves the stream readable. Reading extends the peer's flow-control credit,
/// so a slow reader slows the sender instead of buffering without bound.
public final class TransportStream: Sendable {
    /// The QUIC stream ID.
    public let id: Int64
    /// The connection the stream belongs to (kept alive while the stream is used).
    public let connection: TransportConnection
    let handle: IncomingStreamHandle

    init(handle: IncomingStreamHandle, connection: TransportConnection) {
        self.id = handle.id
        self.handle = handle
        self.connection = connection
    }

    /// Sends one control message (length-prefixed). Suspends only while the stream's send buffer is full.
    ///
    /// - Throws: `messageEmpty` for an empty message, `messageTooLarge` for one above the configured maximum;
    ///   `streamStopped`, `streamClosed`, or the connection's close error.
    public func send(_ message: [UInt8]) async throws {
        guard !message.isEmpty else {
            throw TransportError(.messageEmpty, "a control message must carry at least one byte")
        }
        guard message.count <= connection.maximumMessageSize else {
            throw TransportError(
                .messageTooLarge,
                "a \(message.count)-byte message exceeds the maximum of \(connection.maximumMessageSize) bytes")
        }
        try await connection.backend.write(stream: id, MessageFraming.frame(message), fin: false)
    }

    /// Writes raw bytes (no framing); `finish: true` also ends the sending side.
    public func write(_ bytes: [UInt8], finish: Bool = false) async throws {
        try await connection.backend.write(stream: id, bytes, fin: finish)
    }

    /// Ends the sending side (FIN) after everything written so far.
    public func finish() async throws {
        try await connection.backend.write(stream: id, [], fin: true)
    }

    /// Abandons the stream in both directions (RESET_STREAM and STOP_SENDING) with an application code.
    public func reset(code: UInt64) {
        connection.backend.reset(stream: id, code: code)
    }

    /// Tells the peer to stop sending (STOP_SENDING); the sending side stays open.
    public func stopSending(code: UInt64) {
        connection.backend.stopSending(stream: id, code: code)
    }

    /// The next received bytes in stream order, or nil once the peer finished the stream (FIN) or closed the
    /// connection cleanly (application code 0). Reading extends the peer's flow-control credit.
    ///
    /// Every byte is returned once, to whichever read takes it; reads may come from any number of loops, one
    /// after another or concurrently. After `nextMessage()` calls, bytes continue exactly where the messages
    /// stopped (a message already decoded but not yet returned comes back with its length prefix).
    ///
    /// - Throws: `streamReset` (the peer reset the stream), `streamClosed` (this side reset it), the connection's
    ///   close error when the connection ended any other way than the peer closing it with code 0 (for example
    ///   `closedByPeer` with the peer's `applicationErrorCode`, `connectionClosed` after a local `close`,
    ///   `idleTimeout`), or `CancellationError` when the waiting task was cancelled — the stream stays readable
    ///   and the next read gets the next bytes. Bytes received before the end are always returned first.
    public func nextChunk() async throws -> StreamChunk? {
        try await handle.inbox.nextChunk(apply: apply)
    }

    /// The next control message, or nil once the peer finished the stream (FIN) or closed the connection cleanly
    /// (application code 0). Reading extends the peer's flow-control credit.
    ///
    /// The stream owns one decoder: every message is returned once, to whichever read takes it, so any number of
    /// loops — one after another, or concurrently — together see each message exactly once, even when several
    /// arrived in one packet. Read messages from the stream's start (or from a message boundary reached with
    /// `nextChunk()`), since a length prefix is only recognised there.
    ///
    /// - Throws: `messageTooLarge` when the peer announces a message above the maximum (the stream is then
    ///   stopped with `messageTooLargeCode`), `messageTruncated` when the stream ends inside a message, the errors
    ///   of `nextChunk()`, and `CancellationError` when the waiting task was cancelled — the stream stays
    ///   readable and the next read gets the next message. Decoding errors repeat on every later read.
    public func nextMessage() async throws -> Message? {
        try await handle.inbox.nextMessage(maximumSize: connection.maximumMessageSize, apply: apply)
    }

    /// The received bytes as a sequence of `nextChunk()` calls. Each loop (or iterator) continues where the
    /// previous one stopped; leaving a loop early (`break`, a thrown error, cancellation) loses nothing. A loop
    /// whose task is cancelled ends (nil), as the datagram and incoming-stream loops do.
    public var chunks: StreamChunks { StreamChunks(stream: self) }

    /// The received control messages as a sequence of `nextMessage()` calls. Each loop (or iterator) continues
    /// where the previous one stopped: after `for try await m in stream.messages { break }` the next loop gets the
    /// next message. A loop ends (nil) at FIN, when the peer closes the connection with code 0, or when its task
    /// is cancelled (as the datagram and incoming-stream loops do; the stream stays readable); it throws for a
    /// reset, a non-zero close code (see `TransportError.applicationErrorCode`) or a transport failure.
    public var messages: StreamMessages { StreamMessages(stream: self) }

    /// After a read: extend the peer's credit by what was taken; stop the stream after an oversized message.
    private func apply(_ effects: StreamInbox.Effects) {
        if effects.consumed > 0 { connection.backend.consumed(stream: id, bytes: effects.consumed) }
        if effects.stopSending { connection.backend.stopSending(stream: id, code: messageTooLargeCode) }
    }
}

/// The bytes of a stream as they arrive: each iteration is a `TransportStream.nextChunk()` call, so the position
/// belongs to the stream, not to the iterator.
public struct StreamChunks: AsyncSequence, Sendable {
    /// A chunk of received bytes.
    public typealias Element = StreamChunk
    let stream: TransportStream

    /// Reads the stream's next chunk on every call.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let stream: TransportStream

        /// The next chunk, or nil at the end of the stream or when the iterating task is cancelled (the stream
        /// stays readable: the next loop gets the next bytes); see `TransportStream.nextChunk()`.
        public mutating func next() async throws -> StreamChunk? {
            do {
                return try await stream.nextChunk()
            } catch is CancellationError {
                return nil
            }
        }
    }

    /// An iterator continuing from the stream's current position.
    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(stream: stream) }
}

/// The control messages of a stream: each iteration is a `TransportStream.nextMessage()` call, so the decoder and
/// its position belong to the stream, not to the iterator.
public struct StreamMessages: AsyncSequence, Sendable {
    /// A decoded control message.
    public typealias Element = Message
    let stream: TransportStream

    /// Reads the stream's next message on every call.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let stream: TransportStream

        /// The next message, or nil at the end of the stream or when the iterating task is cancelled (the stream
        /// stays readable: the next loop gets the next message); see `TransportStream.nextMessage()`.
        public mutating func next() async throws -> Message? {
            do {
                return try await stream.nextMessage()
            } catch is CancellationError {
                return nil
            }
        }
    }

    /// An iterator continuing from the stream's current position.
    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(stream: stream) }
}

/// The application error code sent with STOP_SENDING when a peer's message exceeds the maximum.
public let messageTooLargeCode: UInt64 = 0x5054_0001
