import TransportCore
import TransportIO

/// Request and reply over one stream's messages, so an app needs no matching code: each `request(_:)` sends one
/// message under a request ID and returns the peer's reply naming that ID (`RequestEnvelope`).
///
/// **Matched by ID.** Requests may run concurrently: each is sent at once and gets the reply that names its ID,
/// whatever order the replies come in. A reply no request waits for never shifts later answers: it is dropped and
/// counted in `statistics` — as `late` when its request was cancelled, `duplicates` when its request already had its
/// answer, `unknown` when no request ever had its ID. A message that does not start with a request ID is not a
/// reply (the peer does not speak the envelope): every waiting and later request throws `requestMalformed`, and
/// the stream is reset with `requestMalformedCode`. A relay that pushes messages of its own (floor granted to
/// someone else, a member left) sends them on a stream of its own, read through
/// `TransportConnection.incomingStreams` (or `TransportLink.notices`).
///
/// A request whose task is cancelled throws `CancellationError` at once; its reply, when it comes, is dropped.
///
/// ```swift
/// let control = RequestChannel(stream: try await connection.openStream())
/// let answer = try await control.request(Array("talk 7".utf8))  // e.g. "granted"
/// ```
///
/// The replier reads each message with `RequestEnvelope(decoding:)` and answers with `RequestEnvelope.reply(_:)` on
/// the same stream (`EchoRelay`, which writes every message back, is a correct replier as it is).
public final class RequestChannel: Sendable {
    /// The stream requests and replies travel on.
    public let stream: TransportStream
    private let state = Locked(ChannelState())

    /// Requests on `stream` (usually one this side opened with `TransportConnection.openStream()`). Nothing else
    /// should read the stream's messages: the channel reads them from its first request on.
    public init(stream: TransportStream) {
        self.stream = stream
    }

    deinit {
        state.withLock { $0.reader }?.cancel()
    }

    /// What the channel sent and received, and the replies it dropped.
    public var statistics: RequestChannelStatistics { state.withLock { $0.statistics } }

    /// Sends `message` under the next request ID and returns the body of the reply that names it.
    ///
    /// - Throws: `messageEmpty` for an empty message and the other errors of `TransportStream.send(_:)`
    ///   (`messageTooLarge`, ...); the error the stream's reading ended with (the connection's close error,
    ///   `streamReset`, ...), `streamClosed` when the peer finished the stream or closed the connection cleanly
    ///   before replying, `requestMalformed` when the peer sent a message that is not a reply; `CancellationError`
    ///   when the task is cancelled (before sending: nothing was sent).
    public func request(_ message: [UInt8]) async throws -> [UInt8] {
        guard !message.isEmpty else {
            throw TransportError(.messageEmpty, "a request must carry at least one byte")
        }
        try Task.checkCancellation()
        let id = try state.withLock { state throws(any Error) -> UInt64 in
            if let failure = state.failure { throw failure }
            return state.open()
        }
        startReading()
        do {
            try await stream.send(RequestEnvelope(id: id, body: message).encoded)
        } catch {
            _ = state.withLock { $0.abandon(id) }
            throw error
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let ready = state.withLock { $0.wait(id, continuation) }
                if let ready { continuation.resume(with: ready) }
            }
        } onCancel: {
            state.withLock { $0.abandon(id) }?.resume(throwing: CancellationError())
        }
    }

    /// Starts the one loop that reads replies and hands each to its request (once).
    private func startReading() {
        state.withLock { state in
            guard state.reader == nil else { return }
            state.reader = Task { [state = self.state, stream] in
                await Self.readReplies(stream, into: state)
            }
        }
    }

    private static func readReplies(_ stream: TransportStream, into state: Locked<ChannelState>) async {
        let failure: any Error
        do {
            while true {
                guard let message = try await stream.nextMessage() else {
                    failure = TransportError(
                        .streamClosed, "the peer ended the request stream \(stream.id) before replying")
                    break
                }
                let reply: RequestEnvelope
                do {
                    reply = try RequestEnvelope(decoding: message.bytes)
                } catch {
                    state.withLock { $0.statistics.malformed += 1 }
                    stream.reset(code: requestMalformedCode)
                    failure = error
                    break
                }
                state.withLock { $0.deliver(reply) }?.resume(returning: reply.body)
            }
        } catch {
            failure = error
        }
        for waiting in state.withLock({ $0.fail(failure) }) { waiting.resume(throwing: failure) }
    }
}

/// The application error code a `RequestChannel` resets its stream with after a message that is not a reply.
public let requestMalformedCode: UInt64 = 0x5054_0002

/// What a `RequestChannel` sent, what was answered, and the replies it dropped.
public struct RequestChannelStatistics: Hashable, Sendable {
    /// Requests sent (given an ID).
    public var sent: UInt64 = 0
    /// Replies handed to the request they name.
    public var answered: UInt64 = 0
    /// Replies to a request that was cancelled before its reply came (dropped).
    public var late: UInt64 = 0
    /// Replies to a request that already had its answer (dropped).
    public var duplicates: UInt64 = 0
    /// Replies naming an ID no request had (dropped).
    public var unknown: UInt64 = 0
    /// Messages that did not start with a request ID (the channel failed on the first).
    public var malformed: UInt64 = 0
}

/// The requests of a channel waiting for their replies, by ID.
struct ChannelState {
    /// A request sent: its reply, once it came, or the task waiting for it.
    enum Slot {
        case waiting(CheckedContinuation<[UInt8], any Error>?)
        case done(Result<[UInt8], any Error>)
    }

    /// Cancelled requests remembered (to count their late replies as such), the oldest forgotten first.
    static let abandonedLimit = 1024

    var nextID: UInt64 = 0
    var slots: [UInt64: Slot] = [:]
    var abandoned: Set<UInt64> = []
    var abandonedOrder: [UInt64] = []
    var failure: (any Error)?
    var reader: Task<Void, Never>?
    var statistics = RequestChannelStatistics()

    /// A new request ID.
    mutating func open() -> UInt64 {
        let id = nextID
        nextID += 1
        slots[id] = .waiting(nil)
        statistics.sent += 1
        return id
    }

    /// The request's reply if it came already; otherwise `continuation` waits for it.
    mutating func wait(
        _ id: UInt64, _ continuation: CheckedContinuation<[UInt8], any Error>
    ) -> Result<[UInt8], any Error>? {
        switch slots[id] {
        case .done(let result):
            slots[id] = nil
            return result
        case .waiting:
            slots[id] = .waiting(continuation)
            return nil
        case nil:
            return .failure(CancellationError())  // cancelled before it began to wait
        }
    }

    /// The request gives up (cancelled, or its send failed): its reply will be dropped as late.
    mutating func abandon(_ id: UInt64) -> CheckedContinuation<[UInt8], any Error>? {
        guard let slot = slots.removeValue(forKey: id) else { return nil }
        abandoned.insert(id)
        abandonedOrder.append(id)
        if abandonedOrder.count > Self.abandonedLimit { abandoned.remove(abandonedOrder.removeFirst()) }
        if case .waiting(let continuation) = slot { return continuation }
        return nil
    }

    /// Hands `reply` to the request it names; counts it when none waits.
    mutating func deliver(_ reply: RequestEnvelope) -> CheckedContinuation<[UInt8], any Error>? {
        switch slots[reply.id] {
        case .waiting(let continuation?):
            slots[reply.id] = nil
            statistics.answered += 1
            return continuation
        case .waiting(nil):
            slots[reply.id] = .done(.success(reply.body))
            statistics.answered += 1
        case .done:
            statistics.duplicates += 1
        case nil:
            if abandoned.remove(reply.id) != nil {
                statistics.late += 1
            } else if reply.id < nextID {
                statistics.duplicates += 1
            } else {
                statistics.unknown += 1
            }
        }
        return nil
    }

    /// No reply can come any more: every request waiting gets `error`, and so does every later one.
    mutating func fail(_ error: any Error) -> [CheckedContinuation<[UInt8], any Error>] {
        failure = error
        var waiting: [CheckedContinuation<[UInt8], any Error>] = []
        for (id, slot) in slots {
            guard case .waiting(let continuation) = slot else { continue }
            if let continuation {
                waiting.append(continuation)
                slots[id] = nil
            } else {
                slots[id] = .done(.failure(error))
            }
        }
        return waiting
    }
}
