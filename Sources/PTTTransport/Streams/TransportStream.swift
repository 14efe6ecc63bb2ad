import TransportCore

/// A bidirectional stream: reliable, ordered bytes, with a message API (varint length prefix) on top.
///
/// Use either `messages` or `chunks` to read, not both. Reading extends the peer's flow-control credit, so a
/// slow reader slows the sender instead of buffering without bound.
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
    /// - Throws: `messageTooLarge` for an empty message or one above the configured maximum; `streamStopped`,
    ///   `streamClosed`, or the connection's close error.
    public func send(_ message: [UInt8]) async throws {
        guard !message.isEmpty else {
            throw TransportError(.messageTooLarge, "a control message must carry at least one byte")
        }
        guard message.count <= connection.maximumMessageSize else {
            throw TransportError(.messageTooLarge,
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

    /// The received bytes in order. Ends at FIN; throws `streamReset` if the peer reset the stream.
    public var chunks: StreamChunks { StreamChunks(stream: self) }

    /// The received control messages. Ends at FIN; throws `messageTooLarge` (and stops the stream) when the
    /// peer announces a message above the maximum, `messageTruncated` when FIN cuts a message.
    public var messages: StreamMessages { StreamMessages(stream: self) }
}

/// The bytes of a stream as they arrive.
public struct StreamChunks: AsyncSequence, Sendable {
    public typealias Element = StreamChunk
    let stream: TransportStream

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncThrowingStream<StreamChunkEvent, any Error>.AsyncIterator
        let stream: TransportStream

        public mutating func next() async throws -> StreamChunk? {
            while let event = try await base.next() {
                if !event.bytes.isEmpty {
                    stream.connection.backend.consumed(stream: stream.id, bytes: event.bytes.count)
                    return StreamChunk(bytes: event.bytes, isEarly: event.isEarly)
                }
            }
            return nil
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: stream.handle.chunks.makeAsyncIterator(), stream: stream)
    }
}

/// The control messages of a stream.
public struct StreamMessages: AsyncSequence, Sendable {
    public typealias Element = Message
    let stream: TransportStream

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncThrowingStream<StreamChunkEvent, any Error>.AsyncIterator
        let stream: TransportStream
        var decoder: MessageDecoder
        var ready: [Message] = []
        var sawEarly = false
        var ended = false
        var pendingError: (any Error)?

        public mutating func next() async throws -> Message? {
            while ready.isEmpty {
                if ended {
                    if let error = pendingError {
                        pendingError = nil
                        throw error
                    }
                    return nil
                }
                guard let event = try await base.next() else {
                    ended = true
                    try decoder.finish()
                    return nil
                }
                if !event.bytes.isEmpty {
                    stream.connection.backend.consumed(stream: stream.id, bytes: event.bytes.count)
                }
                sawEarly = sawEarly || event.isEarly
                do {
                    ready = try decoder.feed(event.bytes).map { Message(bytes: $0, isEarly: sawEarly) }
                } catch {
                    ended = true
                    stream.connection.backend.stopSending(stream: stream.id, code: messageTooLargeCode)
                    throw error
                }
                if !decoder.hasPartialMessage { sawEarly = false }
                if event.fin {
                    ended = true
                    do { try decoder.finish() } catch { pendingError = error }
                }
            }
            return ready.removeFirst()
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: stream.handle.chunks.makeAsyncIterator(), stream: stream,
                      decoder: MessageDecoder(maximumSize: stream.connection.maximumMessageSize))
    }
}

/// The application error code sent with STOP_SENDING when a peer's message exceeds the maximum.
public let messageTooLargeCode: UInt64 = 0x5054_0001
