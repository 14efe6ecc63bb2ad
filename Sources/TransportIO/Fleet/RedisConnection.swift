import Glibc
import TransportCore

/// One TCP connection to a Redis (or Valkey) server, used synchronously within a deadline: commands go out,
/// their replies are read until the deadline, and then the caller goes on whatever happened. For a thread that may
/// wait (a server reading the store's memory marker as it starts, tests) — never an event loop, whose connection
/// is a `RedisPipeline`. The deadline holds whatever the server sends: it is checked after every read, and a reply
/// longer than `maxReplyBytes` fails at once.
///
/// A connection that missed a deadline or saw a malformed reply is closed (a late reply would answer the next
/// command); the next call reconnects once `retryDelay` has passed since the failure, which doubles up to
/// `maxRetryDelay` while the server stays away and drops back to `minRetryDelay` after a success.
///
/// With `tls` (`rediss://`) each connection runs a `RedisTLSChannel`: commands are queued until its handshake
/// verified the server, within the same deadline.
package final class RedisConnection {
    private let addresses: [SocketAddress]
    private let database: Int
    /// `AUTH` sent first on each connection (nil: none).
    private let auth: [String]?
    private var socket: TCPSocket?
    private let tls: RedisTLS?
    private var channel: RedisTLSChannel?
    /// Whether a reply came on this connection (a close or garbage before one may be the wrong kind of port).
    private var answered = false
    private var decoder: RESPDecoder
    /// The longest reply read (longer ones fail: a server that streams without end is given up at once).
    package let maxReplyBytes: Int
    private var readBuffer = [UInt8](repeating: 0, count: 4096)
    /// Monotonic nanoseconds before which no reconnect is tried.
    private var retryAt: UInt64 = 0
    package let minRetryDelay: UInt64 = 20_000_000
    package let maxRetryDelay: UInt64 = 500_000_000
    private var retryDelay: UInt64 = 20_000_000

    /// A connection to the first of `addresses` that answers, selecting `database` on each connect; nothing is
    /// opened until the first call.
    package init(
        addresses: [SocketAddress], database: Int, auth: [String]? = nil, tls: RedisTLS? = nil,
        maxReplyBytes: Int = 64 * 1024
    ) {
        self.tls = tls
        self.addresses = addresses
        self.auth = auth
        self.database = database
        self.maxReplyBytes = maxReplyBytes
        decoder = RESPDecoder(maxValueBytes: maxReplyBytes)
    }

    deinit { socket?.close() }

    /// Whether a connection is open now (for tests).
    package var isConnected: Bool { socket != nil }

    /// Sends `commands` (each an array of arguments) and returns their replies in order, or throws when the
    /// server cannot answer them all before `deadline` (monotonic nanoseconds): unreachable, in its retry delay,
    /// slow, closed, or not speaking RESP2; the connection is then closed. An error reply is a reply (`.error`).
    package func call(_ commands: [[String]], deadline: UInt64) throws(TransportError) -> [RESPValue] {
        do {
            return try attempt(commands, deadline: deadline)
        } catch {
            drop()
            throw error
        }
    }

    /// Lets the next call reconnect at once, whatever the retry delay (a kept connection turned out closed: the
    /// server may have restarted since, and a new connection is likely to work).
    package func reconnectNow() { retryAt = 0 }

    private func attempt(_ commands: [[String]], deadline: UInt64) throws(TransportError) -> [RESPValue] {
        var request: [UInt8] = []
        var skipped = 0  // the replies to AUTH and SELECT, sent first on a new connection
        if socket == nil {
            try connect(deadline: deadline)
            if let auth {
                request += RESPValue.command(auth)
                skipped += 1
            }
            if database != 0 {
                request += RESPValue.command(["SELECT", String(database)])
                skipped += 1
            }
        }
        for command in commands { request += RESPValue.command(command) }
        try send(request, deadline: deadline)
        var replies: [RESPValue] = []
        while replies.count < commands.count + skipped {
            replies.append(try receive(deadline: deadline))
        }
        for reply in replies.prefix(skipped) {
            if case .error(let text) = reply {
                throw TransportError(.invalidConfiguration, "Redis refused AUTH or SELECT: \(text)")
            }
        }
        retryDelay = minRetryDelay
        return Array(replies.dropFirst(skipped))
    }

    private func connect(deadline: UInt64) throws(TransportError) {
        let now = MonotonicClock.now()
        guard now >= retryAt else { throw TransportError(.unreachable, "Redis: waiting before reconnecting") }
        retryAt = now + retryDelay
        retryDelay = min(maxRetryDelay, retryDelay * 2)
        var lastError = TransportError(.unreachable, "Redis: no address")
        for address in addresses {
            do {
                let candidate = try TCPSocket(connectingTo: address)
                try wait(for: Int16(POLLOUT), on: candidate, deadline: deadline)
                if let error = candidate.connectionError() {
                    candidate.close()
                    lastError = error
                    continue
                }
                socket = candidate
                decoder = RESPDecoder(maxValueBytes: maxReplyBytes)
                channel = try tls.map { tls throws(TransportError) in try RedisTLSChannel(tls) }
                return
            } catch {
                lastError = error
            }
        }
        throw lastError
    }

    /// Sends `plaintext` (through TLS when the connection has it; queued there until its handshake completed).
    private func send(_ plaintext: [UInt8], deadline: UInt64) throws(TransportError) {
        guard let channel else { return try write(plaintext, deadline: deadline) }
        try channel.send(plaintext)
        try write(channel.takeCiphertext(), deadline: deadline)
    }

    private func write(_ bytes: [UInt8], deadline: UInt64) throws(TransportError) {
        guard let socket else { throw TransportError(.connectionClosed, "Redis: not connected") }
        var sent = 0
        while sent < bytes.count {
            let n = try bytes.withUnsafeBytes { buffer in
                Result { () throws(TransportError) in
                    try socket.write(UnsafeRawBufferPointer(rebasing: buffer[sent...]))
                }
            }.get()
            sent += n
            if sent < bytes.count && n == 0 { try wait(for: Int16(POLLOUT), on: socket, deadline: deadline) }
        }
    }

    private func receive(deadline: UInt64) throws(TransportError) -> RESPValue {
        guard let socket else { throw TransportError(.connectionClosed, "Redis: not connected") }
        while true {
            do {
                if let value = try decoder.next() {
                    answered = true
                    return value
                }
            } catch {
                throw TransportError(
                    .protocolViolation,
                    "Redis reply is not RESP2: \(error.description)"
                        + (answered || tls != nil ? "" : Self.plainOnTLSPortHint))
            }
            guard MonotonicClock.now() < deadline else {
                if let channel, !channel.isHandshakeComplete { throw channel.handshakeTimedOut() }
                throw TransportError(.unreachable, "Redis did not answer in time")
            }
            let count: Int?
            do {
                count = try readBuffer.withUnsafeMutableBytes { buffer in
                    Result { () throws(TransportError) in try socket.read(into: buffer) }
                }.get()
            } catch {
                guard !answered, tls == nil else { throw error }  // a tls-port resets a plain client
                throw TransportError(
                    error.code, error.message + Self.plainOnTLSPortHint, libraryCode: error.libraryCode)
            }
            switch count {
            case nil:
                do {
                    try wait(for: Int16(POLLIN), on: socket, deadline: deadline)
                } catch {
                    if let channel, !channel.isHandshakeComplete, MonotonicClock.now() >= deadline {
                        throw channel.handshakeTimedOut()
                    }
                    throw error
                }
            case 0?:
                if let channel, !channel.isHandshakeComplete { throw channel.closedDuringHandshake() }
                throw TransportError(
                    .connectionReset,
                    "Redis closed the connection"
                        + (answered
                            ? ""
                            : " before answering: check the ACL user and password (AUTH)" + Self.plainOnTLSPortHint))
            case let n?:
                guard let channel else {
                    decoder.append(readBuffer[0..<n])
                    continue
                }
                let plaintext = try readBuffer.withUnsafeBytes { buffer in
                    Result { () throws(TransportError) in
                        try channel.receive(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
                    }
                }.get()
                decoder.append(plaintext)
                try write(channel.takeCiphertext(), deadline: deadline)  // the handshake's answer, queued commands
            }
        }
    }

    /// What a failure before the first reply on a plain connection adds.
    static let plainOnTLSPortHint = "; if the port is Redis' tls-port, the URL is rediss://, not redis://"

    /// Waits until `socket` is ready for `events` or `deadline` passes (a throw).
    private func wait(for events: Int16, on socket: TCPSocket, deadline: UInt64) throws(TransportError) {
        while true {
            let now = MonotonicClock.now()
            guard now < deadline else { throw TransportError(.unreachable, "Redis did not answer in time") }
            let milliseconds = Int32(clamping: (deadline - now + 999_999) / 1_000_000)  // poll's unit, rounded up
            var entry = pollfd(fd: socket.fd, events: events, revents: 0)
            let rv = poll(&entry, 1, milliseconds)
            if rv > 0 { return }  // ready, or an error the next read, write or SO_ERROR reports
            if rv < 0 && errno != EINTR {
                throw TransportError(.systemCallFailed, "poll on the Redis connection: \(errnoDescription(errno))")
            }
        }
    }

    private func drop() {
        socket?.close()
        socket = nil
        channel = nil
        answered = false
        decoder = RESPDecoder(maxValueBytes: maxReplyBytes)
    }
}
