import Glibc
import TransportCore

/// One event loop's persistent connection to Redis (or Valkey): non-blocking, registered with the loop's epoll,
/// pipelined (commands go out as they come; replies are matched to them in order). Nothing here ever waits:
/// a command's answer comes later, on the loop, once.
///
/// - **Deadlines.** Each command has its own deadline, which counts its own round trip only: a command is sent
///   only on an established connection (`isReady`; while connecting or waiting to reconnect the caller answers at
///   once), and past its deadline its caller gets `.timedOut` while the reply, when it comes, is matched and
///   dropped. A connection whose oldest command has waited `staleAfter` without a reply is closed (the server is
///   gone or stopped); a short stall is not: replies resume and so does the connection.
/// - **Reconnecting** happens in the background, after `retryDelay` (from `minRetryDelay`, doubling up to
///   `maxRetryDelay` while the server stays away, back to the minimum after a reply), then `onConnect`'s commands
///   go first on the new connection.
/// - **Bounds.** A reply longer than `maxReplyBytes` (longer than any valid one), a malformed one, one nobody asked
///   for, end of stream or an error close the connection (everything pending is answered `.failed`); at most
///   `maxPending` commands wait for replies and `maxOutbound` bytes for the socket (beyond: not ready). Each
///   readiness event reads at most `readsPerEvent` buffers, so a server that streams without end shares the loop.
///
/// - **TLS** (`rediss://`, `tls`): each connection runs a `RedisTLSChannel` between the socket and the RESP decoder;
///   the connection is established once the handshake verified the server's certificate and name (within
///   `staleAfter`, else it is given up and retried), and a failure is kept as `lastError`, saying what to check.
///
/// - Important: Create and use it on its loop's thread only.
package final class RedisPipeline {
    /// How a command ended.
    package enum Answer: Equatable, Sendable {
        /// The server's reply (an error reply is a reply: `.error`).
        case reply(RESPValue)
        /// The deadline passed first.
        case timedOut
        /// Not sent, or the connection failed before the reply.
        case failed
    }

    private struct Pending {
        let sent: UInt64
        let deadline: UInt64
        var answer: ((Answer) -> Void)?
    }

    package let loop: EventLoop
    private let addressBook: RedisAddressBook
    /// TLS for every connection (nil: plain TCP).
    private let tls: RedisTLS?
    /// Told each failure that says what to fix (`lastError`), as it happens.
    private let onError: (TransportError) -> Void
    /// Commands sent first on each new connection, with what to do with their answers.
    private let onConnect: () -> [(command: [String], answer: (Answer) -> Void)]
    package let minRetryDelay: UInt64
    package let maxRetryDelay: UInt64
    package let staleAfter: UInt64
    package let maxReplyBytes: Int
    /// The most elements a reply's array may have (a longer one closes the connection).
    package let maxArrayCount: Int
    package let maxPending = 1024
    package let maxOutbound = 64 * 1024
    static let readsPerEvent = 8

    private var socket: TCPSocket?
    /// The TCP connection is up (with TLS: its handshake may still be running).
    private var connected = false
    /// Commands may go out: connected, and with TLS the handshake completed.
    private var established = false
    private var channel: RedisTLSChannel?
    /// Whether a reply (or, with TLS, a byte) came on this connection: a close before one is a misconfiguration.
    private var heardFromServer = false
    private var addressIndex = 0
    private var decoder: RESPDecoder
    private var outbound: [UInt8] = []
    private var watchingWritable = false
    /// Commands waiting for their replies, oldest first (a timed-out one keeps its place until its reply comes).
    private var pending = FIFOQueue<Pending>()
    /// Bumped whenever the connection is dropped: an answer callback that restarted it stops the loop reading.
    private var generation: UInt64 = 0
    private var retryDelay: UInt64
    private let timerID: Int
    private let reconnectTimerID: Int
    /// When the deadline timer fires next (nil: disarmed).
    private var armedAt: UInt64?
    private var stopped = false
    /// Connections closed so far, and why the last one was (for statistics and tests).
    package private(set) var restarts = 0
    package private(set) var lastFailure: String?
    /// The last connection's failure when it says what to fix (TLS verification, the wrong kind of port).
    package private(set) var lastError: TransportError?
    /// The most reply bytes held at once (received, not yet decoded into replies): at most `maxReplyBytes` plus
    /// one read, whatever the server sends.
    package private(set) var peakBufferedBytes = 0

    /// Starts connecting to the first of `addresses` that answers; on each connection `onConnect`'s commands go
    /// first. `staleAfter`: how long a reply may be missing before the connection is given up.
    package init(
        loop: EventLoop, addressBook: RedisAddressBook, tls: RedisTLS? = nil, staleAfter: UInt64 = 500_000_000,
        maxReplyBytes: Int = 4096,
        maxArrayCount: Int = 16, retryDelays: ClosedRange<UInt64> = 10_000_000...500_000_000,
        onError: @escaping (TransportError) -> Void = { _ in },
        onConnect: @escaping () -> [(command: [String], answer: (Answer) -> Void)] = { [] }
    ) {
        precondition(loop.inEventLoop)
        self.loop = loop
        self.addressBook = addressBook
        self.tls = tls
        self.onError = onError
        minRetryDelay = retryDelays.lowerBound
        maxRetryDelay = retryDelays.upperBound
        self.onConnect = onConnect
        self.staleAfter = staleAfter
        self.maxReplyBytes = maxReplyBytes
        self.maxArrayCount = maxArrayCount
        decoder = RESPDecoder(maxValueBytes: maxReplyBytes, maxArrayCount: maxArrayCount, maxDepth: 2)
        retryDelay = retryDelays.lowerBound
        timerID = loop.makeTimerID()
        reconnectTimerID = loop.makeTimerID()
        loop.setTimerHandler(timerID) { [weak self] in self?.checkDeadlines() }
        connect()
    }

    deinit {
        guard let socket else { return }
        if loop.inEventLoop { loop.unregister(fd: socket.fd) }
        socket.close()
    }

    /// Whether a command sent now goes out on an established connection with room for it.
    package var isReady: Bool {
        established && !stopped && pending.count < maxPending && outbound.count < maxOutbound
    }

    /// Commands sent and not answered by the server yet (timed-out ones included until their reply comes).
    package var inFlight: Int { pending.count }

    /// Sends `command`; `answer` runs once, on the loop, never from within this call.
    package func send(_ command: [String], deadline: UInt64, answer: @escaping (Answer) -> Void) {
        guard isReady, let socket else {
            loop.deferUntilIdle { answer(.failed) }
            return
        }
        guard enqueue(RESPValue.command(command)) else { return loop.deferUntilIdle { answer(.failed) } }
        pending.append(Pending(sent: MonotonicClock.now(), deadline: deadline, answer: answer))
        flush(socket)
        if armedAt.map({ deadline < $0 }) ?? (self.socket != nil) { arm(at: deadline) }
    }

    /// Closes the connection (everything pending is answered `.failed`) and reconnects after the retry delay.
    package func restart(_ reason: String) {
        guard socket != nil || established else { return }
        drop(reason)
    }

    /// `restart` for a failure that says what to fix (kept as `lastError`).
    package func restart(_ error: TransportError) {
        guard socket != nil || established else { return }
        drop(error)
    }

    /// Closes for good (the loop is stopping): nothing is answered any more.
    package func stop() {
        stopped = true
        loop.cancelTimer(timerID)
        loop.cancelTimer(reconnectTimerID)
        if let socket {
            loop.unregister(fd: socket.fd)
            socket.close()
        }
        socket = nil
        established = false
        connected = false
        channel = nil
        pending.updateEach { $0.answer = nil }
    }

    // MARK: - Connecting

    private func connect() {
        guard !stopped, socket == nil else { return }
        let addresses = addressBook.current
        guard !addresses.isEmpty else {  // the host does not resolve (yet): ask again, try later
            addressBook.refresh()
            return failConnect("Redis host \(addressBook.host) does not resolve")
        }
        let address = addresses[addressIndex % addresses.count]
        do throws(TransportError) {
            let candidate = try TCPSocket(connectingTo: address)
            try loop.register(fd: candidate.fd, events: EventLoop.readable | EventLoop.writable) { [weak self] ready in
                self?.socketEvent(ready)
            }
            socket = candidate
            watchingWritable = true
        } catch {
            failConnect("connecting to Redis at \(address): \(error.message)")
        }
    }

    private func failConnect(_ reason: String) {
        addressIndex += 1
        addressBook.refresh()  // the name may have moved (a failover): the next attempt uses what it says then
        lastFailure = reason
        scheduleReconnect()
    }

    private func scheduleReconnect() {
        guard !stopped else { return }
        let delay = retryDelay
        retryDelay = min(maxRetryDelay, retryDelay * 2)
        loop.schedule(timer: reconnectTimerID, at: MonotonicClock.now() + delay) { [weak self] in self?.connect() }
    }

    /// TCP is up: with TLS the handshake starts (and must complete within `staleAfter`), else commands may go.
    private func connected(_ socket: TCPSocket) {
        connected = true
        decoder = RESPDecoder(maxValueBytes: maxReplyBytes, maxArrayCount: maxArrayCount, maxDepth: 2)
        guard let tls else { return established(socket) }
        do throws(TransportError) {
            let channel = try RedisTLSChannel(tls)
            self.channel = channel
            outbound += channel.takeCiphertext()
        } catch {
            return drop(error)
        }
        loop.schedule(timer: reconnectTimerID, at: MonotonicClock.now() + staleAfter) { [weak self] in
            guard let self, !self.established, let channel = self.channel else { return }
            self.drop(channel.handshakeTimedOut())
        }
    }

    private func established(_ socket: TCPSocket) {
        established = true
        if tls != nil { loop.disarm(timer: reconnectTimerID) }
        let deadline = MonotonicClock.now() + staleAfter
        for (command, answer) in onConnect() {
            guard enqueue(RESPValue.command(command)) else { return }
            pending.append(Pending(sent: MonotonicClock.now(), deadline: deadline, answer: answer))
        }
        flush(socket)
        armTimer()
    }

    /// Queues a command's bytes for the socket (encrypted with TLS); false when encryption failed (the connection
    /// was dropped).
    private func enqueue(_ plaintext: [UInt8]) -> Bool {
        guard let channel else {
            outbound += plaintext
            return true
        }
        do throws(TransportError) {
            try channel.send(plaintext)
        } catch {
            drop(error)
            return false
        }
        outbound += channel.takeCiphertext()
        return true
    }

    // MARK: - Events

    private func socketEvent(_ ready: UInt32) {
        guard let socket else { return }
        if !connected {
            if let error = socket.connectionError() {
                drop("connecting to Redis: \(error.message)", connectFailed: true)
                return
            }
            connected(socket)
            guard self.socket === socket else { return }
        }
        if ready & ~EventLoop.writable != 0 { read(socket) }
        if self.socket === socket, ready & EventLoop.writable != 0 { flush(socket) }
    }

    private func read(_ socket: TCPSocket) {
        let current = generation
        loop.withScratchBuffer { buffer in
            for _ in 0..<Self.readsPerEvent {
                let count: Int?
                do throws(TransportError) {
                    count = try socket.read(
                        into: UnsafeMutableRawBufferPointer(rebasing: buffer[..<min(buffer.count, 16_384)]))
                } catch {
                    guard heardFromServer || tls != nil else {  // a tls-port resets a plain client
                        return drop(
                            TransportError(
                                error.code, "reading from Redis: \(error.message)" + RedisConnection.plainOnTLSPortHint,
                                libraryCode: error.libraryCode))
                    }
                    return drop("reading from Redis: \(error.message)")
                }
                guard let count else { return }
                guard count > 0 else { return closed() }
                let bytes = UnsafeRawBufferPointer(rebasing: buffer[..<count])
                if let channel {
                    let plaintext: [UInt8]
                    do throws(TransportError) {
                        plaintext = try channel.receive(bytes)
                    } catch {
                        return drop(error)
                    }
                    heardFromServer = true
                    outbound += channel.takeCiphertext()
                    if !established && channel.isHandshakeComplete { established(socket) }
                    guard generation == current else { return }
                    decoder.append(plaintext)
                    if !outbound.isEmpty { flush(socket) }
                    guard generation == current else { return }
                } else {
                    decoder.append(bytes)
                }
                peakBufferedBytes = max(peakBufferedBytes, decoder.bufferedBytes)
                while generation == current {
                    let value: RESPValue
                    do throws(RESPError) {
                        guard let next = try decoder.next() else { break }
                        value = next
                    } catch {
                        guard heardFromServer || tls != nil else {  // a TLS port answers plain text with an alert
                            return drop(
                                TransportError(
                                    .protocolViolation,
                                    "Redis at \(addressBook.host) answered with what is not RESP (\(error.description))"
                                        + RedisConnection.plainOnTLSPortHint))
                        }
                        return drop("Redis sent what is not a valid reply: \(error.description)")
                    }
                    deliver(value)
                }
                guard generation == current else { return }
            }
        }
    }

    /// A reply: it answers the oldest command still waiting for one.
    private func deliver(_ value: RESPValue) {
        guard let oldest = pending.popFirst() else { return drop("Redis sent a reply nobody asked for") }
        heardFromServer = true
        lastError = nil
        retryDelay = minRetryDelay
        oldest.answer?(.reply(value))
    }

    private func flush(_ socket: TCPSocket) {
        var written = 0
        while written < outbound.count {
            let n: Int
            do throws(TransportError) {
                n = try outbound.withUnsafeBytes { bytes in
                    Result { () throws(TransportError) in
                        try socket.write(UnsafeRawBufferPointer(rebasing: bytes[written...]))
                    }
                }.get()
            } catch {
                return drop("writing to Redis: \(error.message)")
            }
            if n == 0 { break }
            written += n
        }
        outbound.removeFirst(written)
        let wantWritable = !outbound.isEmpty
        if wantWritable != watchingWritable, connected {
            watchingWritable = wantWritable
            loop.modify(fd: socket.fd, events: EventLoop.readable | (wantWritable ? EventLoop.writable : 0))
        }
    }

    // MARK: - Time

    /// Arms the timer for the earliest deadline of a command still unanswered, or the stale check.
    private func armTimer() {
        guard let oldest = pending.first else {
            armedAt = nil
            return loop.disarm(timer: timerID)
        }
        var next = oldest.sent &+ staleAfter
        pending.visit { if $0.answer != nil { next = min(next, $0.deadline) } }
        arm(at: next)
    }

    private func arm(at deadline: UInt64) {
        armedAt = deadline
        loop.arm(timer: timerID, at: deadline)
    }

    /// Answers the commands past their deadline (their replies stay expected), and gives up a connection whose
    /// oldest command has had no reply for `staleAfter`. Replies already received go first: a loop busy with other
    /// work when they arrived does not make them late.
    private func checkDeadlines() {
        armedAt = nil
        if let socket, established { read(socket) }
        let now = MonotonicClock.now()
        guard let oldest = pending.first else { return }
        if now >= oldest.sent &+ staleAfter { return drop("Redis sent no reply for \(staleAfter / 1_000_000) ms") }
        var late: [(Answer) -> Void] = []
        pending.updateEach { command in
            guard command.deadline <= now, let answer = command.answer else { return }
            command.answer = nil
            late.append(answer)
        }
        armTimer()
        for answer in late { answer(.timedOut) }
    }

    /// The server closed the connection: before any answer, as the wrong kind of port does, with what to check.
    private func closed() {
        if heardFromServer { return drop("Redis closed the connection") }
        if let channel, !channel.isHandshakeComplete { return drop(channel.closedDuringHandshake()) }
        drop(
            TransportError(
                .connectionClosed,
                "Redis at \(addressBook.host) closed the connection before answering: check the ACL user and password "
                    + "(AUTH)" + RedisConnection.plainOnTLSPortHint))
    }

    /// Drops the connection for a failure that says what to fix (kept as `lastError`).
    private func drop(_ error: TransportError) {
        lastError = error
        drop(error.message)
        onError(error)
    }

    /// Closes the connection, answers everything pending `.failed`, and reconnects after the retry delay.
    private func drop(_ reason: String, connectFailed: Bool = false) {
        generation &+= 1
        restarts += 1
        lastFailure = reason
        if let socket {
            loop.unregister(fd: socket.fd)
            socket.close()
        }
        socket = nil
        established = false
        connected = false
        channel = nil
        heardFromServer = false
        watchingWritable = false
        outbound.removeAll()
        var waiting: [(Answer) -> Void] = []
        while let command = pending.popFirst() { if let answer = command.answer { waiting.append(answer) } }
        loop.disarm(timer: timerID)
        armedAt = nil
        if connectFailed { addressIndex += 1 }
        addressBook.refresh()
        scheduleReconnect()
        if !waiting.isEmpty { loop.deferUntilIdle { for answer in waiting { answer(.failed) } } }
    }
}
