internal import CTransportShims
import Glibc
import TransportCore

/// The outgoing packets of one UDP socket during one event-loop turn, sent together with `sendmmsg` at the end of
/// the turn (equal-size packets to one destination share one message with UDP GSO). It never drops a packet
/// because the socket buffer is full: the unsent tail waits for the socket to become writable, and writers wait
/// (`whenRoom`) while the batch is full and the socket is not writable.
///
/// - Important: Loop thread only. The owner of the socket's epoll registration must pass writable events to
///   `socketWritable()`: while the socket is full the batch adds `EventLoop.writable` to the registration.
package final class UDPSendBatch: EndOfTurnFlushing {
    /// Counters over the batch's life.
    package struct Statistics: Sendable {
        /// Packets the kernel accepted.
        package var packetsSent: UInt64 = 0
        /// `sendmmsg` calls.
        package var syscalls: UInt64 = 0
        /// Messages that carried several packets as GSO segments.
        package var gsoMessages: UInt64 = 0
        /// Packets the kernel refused for their own reason (EMSGSIZE, ECONNREFUSED, ...); the others still went.
        package var dropped: UInt64 = 0
        /// Times a flush found the socket buffer full and kept the tail for later.
        package var wouldBlock: UInt64 = 0
        /// errno of the last refused packet (0: none).
        package var lastError: Int32 = 0
        /// Whether GSO is still used (off when the kernel or the socket refused it).
        package var gsoEnabled = false
    }

    package let socket: UDPSocket
    package let loop: EventLoop
    /// The epoll events the socket's owner registered (the batch adds and removes `writable` around them).
    private let ownerEvents: UInt32
    private let batch: OpaquePointer
    private let gso: Bool
    private var flushRequested = false
    /// The socket buffer was full: the queued tail waits for EPOLLOUT.
    private var blocked = false
    private var waitingWriters: [() -> Void] = []

    /// Packets per batch when a caller does not say: 64. The benchmark sets 1 (one syscall per packet, no GSO)
    /// to measure what batching saves, in the same build.
    package static let defaultMaxPackets = Locked(64)

    /// A batch of up to `maxPackets` packets (default `defaultMaxPackets`) for `socket`, registered on `loop`
    /// with `ownerEvents`.
    package init(
        socket: UDPSocket, loop: EventLoop, ownerEvents: UInt32 = EventLoop.readable, maxPackets: Int? = nil,
        gso: Bool = true
    ) throws(TransportError) {
        let maxPackets = maxPackets ?? Self.defaultMaxPackets.withLock { $0 }
        guard (1...1024).contains(maxPackets), let batch = ptt_udp_batch_create(maxPackets) else {
            throw TransportError(
                .invalidConfiguration,
                "a UDP send batch holds 1 to 1024 packets (asked for \(maxPackets)), "
                    + "or memory ran out")
        }
        self.socket = socket
        self.loop = loop
        self.ownerEvents = ownerEvents
        self.batch = batch
        self.gso = gso && ptt_udp_gso_supported(socket.fd) != 0
    }

    deinit { ptt_udp_batch_destroy(batch) }

    /// Packets queued and not yet accepted by the kernel.
    package var queuedPackets: Int { ptt_udp_batch_count(batch) }

    /// Whether the socket buffer was full at the last flush (queued packets wait for writability).
    package var isBlocked: Bool { blocked }

    /// Writes one packet in place: `body` gets a buffer of `capacity` bytes and returns the packet's length (0:
    /// nothing to send), ECN codepoint and destination (nil on a connected socket). Returns that length, or nil
    /// when there is no room (the batch is full and so is the socket buffer): call `whenRoom`, write again then.
    package func write(
        capacity: Int, from local: SocketAddress?,
        _ body: (UnsafeMutableRawBufferPointer) -> (length: Int, ecn: UInt32, remote: SocketAddress?)
    ) -> Int? {
        guard let slot = reserve(capacity) else { return nil }
        let packet = body(UnsafeMutableRawBufferPointer(start: slot, count: capacity))
        guard packet.length > 0 else { return 0 }
        commit(min(packet.length, capacity), to: packet.remote, from: local, ecn: packet.ecn)
        return packet.length
    }

    /// Queues a copy of `bytes`; false when there is no room (see `write`).
    @discardableResult
    package func enqueue(
        _ bytes: UnsafeRawBufferPointer, to remote: SocketAddress?, from local: SocketAddress?, ecn: UInt32
    ) -> Bool {
        write(capacity: bytes.count, from: local) { buffer in
            buffer.copyMemory(from: bytes)
            return (bytes.count, ecn, remote)
        } != nil
    }

    /// Calls `action` once the batch has room again (at once, deferred, when it has room now).
    package func whenRoom(_ action: @escaping () -> Void) {
        precondition(loop.inEventLoop)
        waitingWriters.append(action)
        if !blocked { wakeWriters() }
    }

    /// Sends everything queued now (normally the loop does it at the end of the turn).
    package func flush() {
        precondition(loop.inEventLoop)
        guard !blocked else { return }  // the tail goes when the socket is writable
        send()
    }

    /// The socket became writable: sends the queued tail, then lets waiting writers write again.
    package func socketWritable() {
        guard blocked else { return }
        blocked = false
        send()
        guard !blocked else { return }
        loop.modify(fd: socket.fd, events: ownerEvents)
        wakeWriters()
    }

    package func flushAtEndOfTurn() {
        flushRequested = false
        flush()
    }

    /// The batch's counters.
    package var statistics: Statistics {
        var raw = ptt_udp_batch_stats()
        var gsoEnabled: Int32 = 0
        ptt_udp_batch_get_stats(batch, &raw, &gsoEnabled)
        return Statistics(
            packetsSent: raw.packets_sent, syscalls: raw.syscalls, gsoMessages: raw.gso_messages,
            dropped: raw.dropped, wouldBlock: raw.would_block, lastError: raw.last_error,
            gsoEnabled: gso && gsoEnabled != 0)
    }

    // MARK: - Internals

    /// Room for `capacity` bytes; flushes a full batch first unless the socket is full.
    private func reserve(_ capacity: Int) -> UnsafeMutablePointer<UInt8>? {
        precondition(loop.inEventLoop)
        if let slot = ptt_udp_batch_reserve(batch, capacity) { return slot }
        guard !blocked, ptt_udp_batch_count(batch) > 0 else { return nil }
        send()
        return blocked ? nil : ptt_udp_batch_reserve(batch, capacity)
    }

    private func commit(_ length: Int, to remote: SocketAddress?, from local: SocketAddress?, ecn: UInt32) {
        socket.withRoute(to: remote, from: local) { addr, addrLength, source, sourceLength in
            ptt_udp_batch_commit(batch, length, addr, addrLength, source, sourceLength, ecn)
        }
        if !flushRequested && !blocked {
            flushRequested = true
            loop.flushAtEndOfTurn(self)
        }
    }

    private func send() {
        guard !socket.isClosed else {
            _ = ptt_udp_batch_flush(batch, -1, 0)  // EBADF for each: counted as dropped, the queue empties
            return
        }
        if ptt_udp_batch_flush(batch, socket.fd, gso ? 1 : 0) == -EAGAIN {
            blocked = true
            loop.modify(fd: socket.fd, events: ownerEvents | EventLoop.writable)
        }
    }

    private func wakeWriters() {
        guard !waitingWriters.isEmpty else { return }
        let writers = waitingWriters
        waitingWriters.removeAll()
        loop.deferUntilIdle { for writer in writers { writer() } }
    }
}
