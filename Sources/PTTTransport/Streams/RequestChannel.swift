import TransportCore
import TransportIO

/// Request and reply over one stream's messages, so an app needs no matching code: each `request(_:)` sends one
/// message and returns the next message the peer sends on the stream.
///
/// **One request at a time.** A request waits until the one before it has its reply, then sends: every message
/// the peer sends on this stream must be the reply to one request, in order. (Control traffic in push-to-talk is
/// a request now and then — join, floor, pending — so pipelining would save little and would make a cancelled
/// request's reply hard to place.) A relay that pushes messages of its own (floor granted to someone else, a
/// member left) sends them on a stream of its own, read through `TransportConnection.incomingStreams`.
///
/// A request whose task is cancelled while it waits for its reply throws `CancellationError`; its reply, when it
/// comes, is read and dropped by the next request, so replies never shift onto the wrong request.
///
/// ```swift
/// let control = RequestChannel(stream: try await connection.openStream())
/// let answer = try await control.request(Array("talk 7".utf8))  // e.g. "granted"
/// ```
public final class RequestChannel: Sendable {
    /// The stream requests and replies travel on.
    public let stream: TransportStream
    private let turn = Locked(Turn())

    /// Whose turn it is, and the replies owed to cancelled requests.
    private struct Turn {
        var busy = false
        /// Replies still to come for requests cancelled after they were sent: the next request skips them.
        var owed = 0
        var waiters = ChangeWaiters()
    }

    /// Requests on `stream` (usually one this side opened with `TransportConnection.openStream()`). Nothing else
    /// should read the stream's messages.
    public init(stream: TransportStream) {
        self.stream = stream
    }

    /// Sends `message` once the previous request has its reply, and returns the peer's reply.
    ///
    /// - Throws: the errors of `TransportStream.send(_:)` (`messageEmpty`, `messageTooLarge`, ...) and of
    ///   `TransportStream.nextMessage()` (the connection's close error, `streamReset`, ...); `streamClosed` when
    ///   the peer finished the stream or closed the connection cleanly before replying; `CancellationError` when
    ///   the task is cancelled (before sending: nothing was sent).
    public func request(_ message: [UInt8]) async throws -> [UInt8] {
        try await takeTurn()
        defer { turn.changeAndWake(\.waiters) { $0.busy = false } }
        try await skipOwedReplies()
        try await stream.send(message)
        do {
            return try await nextReply()
        } catch is CancellationError {
            turn.withLock { $0.owed += 1 }
            throw CancellationError()
        }
    }

    /// Waits until no other request is under way, then holds the turn.
    private func takeTurn() async throws {
        while true {
            let (taken, generation) = turn.withLock { turn -> (Bool, UInt64) in
                if turn.busy { return (false, turn.waiters.generation) }
                turn.busy = true
                return (true, 0)
            }
            if taken { return }
            await turn.waitForChange(\.waiters, after: generation)
            try Task.checkCancellation()
        }
    }

    /// Reads and drops the replies of cancelled requests (the turn is held).
    private func skipOwedReplies() async throws {
        while turn.withLock({ $0.owed }) > 0 {
            _ = try await nextReply()
            turn.withLock { $0.owed -= 1 }
        }
    }

    private func nextReply() async throws -> [UInt8] {
        guard let reply = try await stream.nextMessage() else {
            throw TransportError(.streamClosed, "the peer ended the request stream \(stream.id) before replying")
        }
        return reply.bytes
    }
}
