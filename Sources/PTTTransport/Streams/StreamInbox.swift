import TransportCore
import TransportIO

/// The receiving side of one stream, shared by every `TransportStream` value and every loop that reads it: the
/// bytes received but not yet read, the message decoder and its decoded messages, and how the stream ended.
///
/// The event loop appends (`receive`, `end`); readers on any task take (`nextChunk`, `nextMessage`). A reader
/// with nothing to take waits on a continuation; cancelling that wait only ends the wait, never the stream.
final class StreamInbox: Sendable {
    /// How the receiving side ended; buffered bytes are still read first.
    enum End {
        /// FIN, a clean close of the connection, or both directions done: reads end with nil.
        case finished
        /// A reset or a failed connection: reads throw this error.
        case failed(TransportError)
    }

    /// What a read has to do after it releases the lock.
    struct Effects {
        /// Bytes taken out of the inbox: the peer's flow-control credit grows by this much.
        var consumed = 0
        /// The peer announced a message above the maximum: ask it to stop sending.
        var stopSending = false
    }

    private let state = Locked(State())

    /// Bytes arriving while the last buffered chunk is smaller than this join it instead of becoming a chunk of
    /// their own: a peer sending one byte per STREAM frame cannot make the inbox hold one allocation per byte
    /// (about 85 bytes of memory for each byte received), whatever the reader's pace.
    static let coalescingLimit = 16 * 1024

    /// Loop side: bytes (and FIN) arrived. Ignored once the receiving side ended. With `taker`, the messages now
    /// whole are offered to it first, in order, before any reader can see them (see `EarlyMessageTaker`).
    func receive(_ bytes: [UInt8], fin: Bool, isEarly: Bool, offering taker: EarlyMessageTaker? = nil) {
        var effects = Effects()
        notify {
            guard $0.end == nil else { return }
            if !bytes.isEmpty { $0.append(bytes, isEarly: isEarly) }
            if fin { $0.end = .finished }
            if let taker { $0.offer(to: taker, &effects) }
        }
        if effects.consumed > 0 { taker?.consumed(effects.consumed) }
    }

    /// Chunks buffered and not yet read (for tests).
    var bufferedChunks: Int { state.withLock { $0.chunks.count } }

    /// Loop side: the receiving side ended; the first end wins.
    func end(_ end: End) {
        notify { if $0.end == nil { $0.end = end } }
    }

    /// The next bytes in stream order, or nil at the end. After `nextMessage` calls, continues exactly where
    /// they stopped (messages decoded but not yet returned come back in their framing).
    func nextChunk(apply: (Effects) -> Void) async throws -> StreamChunk? {
        try await read(apply: apply) { state, effects in state.takeChunk(&effects) }
    }

    /// The next control message, or nil at the end.
    func nextMessage(maximumSize: Int, apply: (Effects) -> Void) async throws -> Message? {
        try await read(apply: apply) { state, effects in state.takeMessage(maximumSize: maximumSize, &effects) }
    }

    // MARK: - Waiting

    private func read<Value>(
        apply: (Effects) -> Void,
        _ take: (inout State, inout Effects) -> Attempt<Value>
    ) async throws -> Value? {
        while true {
            var effects = Effects()
            let (attempt, generation) = state.withLock { state in
                (take(&state, &effects), state.changeWaiters.generation)
            }
            apply(effects)
            switch attempt {
            case .value(let value): return value
            case .end: return nil
            case .failed(let error): throw error
            case .wait: try await waitForChange(after: generation)
            }
        }
    }

    /// Suspends until the inbox changes after `generation`; throws `CancellationError` (leaving everything
    /// buffered in place) when the task is cancelled.
    private func waitForChange(after generation: UInt64) async throws {
        await state.waitForChange(after: generation)
        try Task.checkCancellation()
    }

    private func notify(_ change: (inout State) -> Void) {
        state.changeAndWake(change)
    }
}

/// The outcome of one attempt to read under the lock.
private enum Attempt<Value> {
    case value(Value)
    case end
    case failed(any Error)
    case wait
}

/// The inbox's lock-protected state.
private struct State: ChangeWatched {
    var chunks = FIFOQueue<StreamChunk>()
    var end: StreamInbox.End?
    /// Created by the first message read; nil while the stream is read as bytes.
    var decoder: MessageDecoder?
    var decoded = ArraySlice<Message>()
    /// Whether any byte of the partial message in the decoder arrived in 0-RTT.
    var partialIsEarly = false
    /// A decoding failure (too large, truncated): every later read throws it.
    var readFailure: TransportError?
    var changeWaiters = ChangeWaiters()

    /// Adds received bytes, joining them to the last chunk while the two fit in `coalescingLimit` and are equally
    /// early. A joined chunk's capacity doubles up to the limit, never past it (a peer's frames cannot make the
    /// inbox hold twice what it received).
    mutating func append(_ bytes: [UInt8], isEarly: Bool) {
        let limit = StreamInbox.coalescingLimit
        let joined = chunks.withLast { last -> Bool in
            let count = last.bytes.count + bytes.count
            guard last.isEarly == isEarly, count <= limit else { return false }
            if count > last.bytes.capacity { last.bytes.reserveCapacity(min(max(count, 2 * last.bytes.count), limit)) }
            last.bytes += bytes
            return true
        }
        if joined != true { chunks.append(StreamChunk(bytes: bytes, isEarly: isEarly)) }
    }

    mutating func takeChunk(_ effects: inout StreamInbox.Effects) -> Attempt<StreamChunk> {
        if let readFailure { return .failed(readFailure) }
        if var decoder {
            // Switching from messages to bytes: hand back what the decoder holds, in stream order.
            var bytes = decoded.flatMap { MessageFraming.frame($0.bytes) }
            let isEarly = decoded.contains { $0.isEarly } || partialIsEarly
            bytes += decoder.takeBuffered()
            self.decoder = nil
            decoded = []
            partialIsEarly = false
            if !bytes.isEmpty { return .value(StreamChunk(bytes: bytes, isEarly: isEarly)) }
        }
        if let chunk = chunks.popFirst() {
            effects.consumed += chunk.bytes.count
            return .value(chunk)
        }
        return ending()
    }

    /// The messages whole now, in order, while `taker` takes them; the first it leaves goes back in front.
    mutating func offer(to taker: EarlyMessageTaker, _ effects: inout StreamInbox.Effects) {
        while case .value(let message) = takeMessage(maximumSize: taker.maximumSize, &effects) {
            guard taker.take(message) else {
                decoded.insert(message, at: decoded.startIndex)
                return
            }
        }
    }

    mutating func takeMessage(maximumSize: Int, _ effects: inout StreamInbox.Effects) -> Attempt<Message> {
        if decoder == nil { decoder = MessageDecoder(maximumSize: maximumSize) }
        while true {
            if let message = decoded.popFirst() { return .value(message) }
            if let readFailure { return .failed(readFailure) }
            guard let chunk = chunks.popFirst() else { break }
            effects.consumed += chunk.bytes.count
            partialIsEarly = partialIsEarly || chunk.isEarly
            do {
                let messages = try decoder!.feed(chunk.bytes)
                decoded += messages.map { Message(bytes: $0, isEarly: partialIsEarly) }
                if !decoder!.hasPartialMessage { partialIsEarly = false }
            } catch {
                readFailure = error
                effects.stopSending = true
            }
        }
        if case .finished = end {
            do {
                try decoder!.finish()
            } catch {
                readFailure = error
                return .failed(error)
            }
        }
        return ending()
    }

    /// Nothing is buffered: the end, or wait for more.
    private func ending<Value>() -> Attempt<Value> {
        switch end {
        case nil: return .wait
        case .finished: return .end
        case .failed(let error): return .failed(error)
        }
    }
}
