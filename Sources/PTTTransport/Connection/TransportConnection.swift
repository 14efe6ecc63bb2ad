import TransportCore
import TransportIO

/// One connection between a client and a relay, over QUIC or (fallback) QMux on TCP. Control messages travel on
/// streams, audio as datagrams.
///
/// Connections are `Identifiable` and `Hashable` by identity. Key side tables by `id` (a `TransportConnection.ID`
/// holds no reference); a table keyed by the connection itself keeps it alive, and so open.
///
/// - Important: Dropping the last reference to an open connection closes it (application code 0), so a
///   forgotten connection never leaks. Call `close(code:reason:)` to choose the code and to wait for the close.
public final class TransportConnection: Sendable, Identifiable, Hashable {
    /// A process-unique, printable identity (`connection-12`), stable for the connection's life.
    public let id: ID
    /// The transport this connection runs on.
    public let path: TransportPath
    /// The peer's address (`host:port`): on a server, the one packets go to now, which moves when the phone's NAT
    /// rebinds (the relay follows the peer once ngtcp2 has validated the new path).
    public var remoteAddress: String { remoteAddressBroadcast.current ?? initialRemoteAddress }
    /// How this connection used saved resumption state. On a client: the outcome of `connect(resuming:)`. On a
    /// server: what the client's ClientHello resumed — `.resumed(earlyData: .accepted)` for a 0-RTT wake, known
    /// as soon as its early data arrives; `.none` until the handshake says otherwise. (A server cannot tell early
    /// data it refused from none sent: both read `.notAttempted` there.)
    public var resumption: ResumptionStatus { backend.resumptionStatus }
    /// Status changes, ending with `.closed(reason)`. Any number of tasks can iterate it: each iterator starts
    /// with the current status (just `.closed` once the connection ended).
    public let statusUpdates: ConnectionStatusUpdates
    /// Received audio datagrams (bounded, drop-oldest).
    public let datagrams: IncomingDatagrams
    /// Why saved resumption state was ignored or only partly used (nil when it was used, or none was given).
    public let resumptionDiagnostic: String?
    let incoming: Mailbox<IncomingStreamHandle>
    package let backend: any ConnectionBackend
    package let maximumMessageSize: Int
    let earlyStreamHandle: IncomingStreamHandle?
    package let statusBroadcast: StatusBroadcast
    let resumptionBroadcast: ValueBroadcast<ResumptionState>
    let remoteAddressBroadcast: ValueBroadcast<String>
    let initialRemoteAddress: String
    let relayNotices: ValueBroadcast<RelayNotice>
    package let activity: PeerActivity
    /// The stream `pushNotice(_:)` opened (once) for the pushes to the peer: its handle only, so the connection
    /// does not hold itself through a `TransportStream` (dropping its last reference still closes it).
    let noticeStream = Locked<Task<IncomingStreamHandle, any Error>?>(nil)

    init(
        path: TransportPath, remoteAddress: String, backend: any ConnectionBackend, sinks: ConnectionSinks,
        maximumMessageSize: Int, earlyStream: IncomingStreamHandle? = nil, resumptionDiagnostic: String? = nil
    ) {
        self.id = ID.next()
        self.path = path
        self.initialRemoteAddress = remoteAddress
        self.remoteAddressBroadcast = sinks.remoteAddresses
        self.earlyStreamHandle = earlyStream
        self.resumptionDiagnostic = resumptionDiagnostic
        self.backend = backend
        self.statusBroadcast = sinks.status
        self.resumptionBroadcast = sinks.resumptionStates
        self.relayNotices = sinks.relayNotices
        self.statusUpdates = ConnectionStatusUpdates(broadcast: sinks.status)
        self.datagrams = IncomingDatagrams(base: sinks.datagrams)
        self.incoming = sinks.incoming
        self.maximumMessageSize = maximumMessageSize
        self.activity = sinks.activity
    }

    deinit { backend.closeSoon(code: 0, reason: "") }

    /// The current status (`statusUpdates` delivers its changes).
    public var status: ConnectionStatus { statusBroadcast.current }

    /// Waits until the connection has closed and returns why; returns at once if it already has. Any number of
    /// tasks may wait.
    ///
    /// - Throws: `CancellationError` only, when the waiting task is cancelled before the close.
    public func closed() async throws(CancellationError) -> CloseReason {
        guard let reason = await statusBroadcast.closed() else { throw CancellationError() }
        return reason
    }

    /// Waits until the handshake has completed (status `.ready`); returns at once if it has. A relay that gets
    /// connections before the handshake (`EarlyDataPolicy.enabled(deliverBeforeHandshake: true)`) calls this
    /// before acting on an early request that is not replay-safe.
    ///
    /// - Throws: the close error when the connection closes first (`TransportError`), or `CancellationError`.
    public func waitUntilReady() async throws {
        for await status in statusUpdates {
            switch status {
            case .connecting: continue
            case .ready: return
            case .closed(let reason): throw reason.error
            }
        }
        try Task.checkCancellation()
        if case .closed(let reason) = status { throw reason.error }
    }

    /// How long ago anything arrived from the peer — a packet of any kind over QUIC (data, ACK, PING), a QMux frame
    /// over TCP — measured on the monotonic clock; counted from the connection's start until the first. A liveness
    /// signal: it grows while the peer is silent or gone, and keep-alives, ACKs and audio all reset it. Cheap to read
    /// from any thread (one atomic load).
    public var timeSinceLastActivity: Duration {
        let now = MonotonicClock.now()
        let last = activity.lastHeard
        return .nanoseconds(Int64(clamping: now > last ? now - last : 0))
    }

    /// Identity: a connection equals only itself.
    public static func == (lhs: TransportConnection, rhs: TransportConnection) -> Bool { lhs === rhs }

    /// Hashes the connection's `id`.
    public func hash(into hasher: inout Hasher) { hasher.combine(id) }

    /// The stream the `earlyMessages` of `connect` went on (read their responses here); nil without them.
    public var earlyStream: TransportStream? {
        earlyStreamHandle.map { TransportStream(handle: $0, connection: self) }
    }

    /// The state to persist for a fast reconnect, refreshed on every NewSessionTicket and NEW_TOKEN. Nil until
    /// the server sent a ticket (shortly after the handshake); always nil on the server side.
    public var resumptionState: ResumptionState? { backend.resumptionState }

    /// Every refreshed `resumptionState`, as it is refreshed (the handshake's end, each NewSessionTicket and
    /// NEW_TOKEN): save each one, and a phone suspended right after connecting still has the newest state. Each
    /// iteration starts with the current state if there is one, keeps only the newest unread one, and ends when
    /// the connection closes. Any number of tasks can iterate it. Empty on servers.
    public var resumptionStates: ResumptionStates { ResumptionStates(base: resumptionBroadcast) }

    /// The peer's address, then each new one: a relay sees a phone's NAT rebinding here (UDP port or address
    /// changed mid-call). Ends when the connection closes. Over TCP the address never changes.
    public var remoteAddresses: RemoteAddresses { RemoteAddresses(base: remoteAddressBroadcast) }

    /// Streams the peer opens, each delivered once to whichever loop reads it.
    public var incomingStreams: IncomingStreams { IncomingStreams(base: incoming, connection: self) }

    /// Opens a bidirectional stream (for control messages or bytes). Waits while the peer's stream limit is
    /// reached (each stream that ends on both sides frees a place at once, over QUIC and TCP); callers waiting are
    /// served in order. Throws if the connection closed, and `CancellationError` if the waiting task is cancelled.
    public func openStream() async throws -> TransportStream {
        TransportStream(handle: try await backend.openStream(), connection: self)
    }

    /// Sends an audio frame as a DATAGRAM. Never suspends: the frame is queued and written ahead of bulk stream
    /// data. If it cannot be sent before `expiresAfter` elapses it is dropped and counted, never queued forever.
    /// The loop judges expiry against the clock it read when its write pass began, so a frame queued during a pass
    /// with an expiry shorter than the pass (microseconds) may still be sent; a zero or negative `expiresAfter`
    /// is never sent.
    ///
    /// - Throws: `datagramEmpty`, `datagramTooLarge` (the message states the current maximum),
    ///   `datagramsUnsupported`, or the connection's close error.
    public func sendDatagram(_ payload: [UInt8], expiresAfter: Duration? = nil) throws {
        let deadline: UInt64
        if let expiresAfter, expiresAfter <= .zero {
            // Stale already: dropped and counted by the loop's next write pass, whenever its clock was read (a
            // pass that read it before this call would otherwise find the frame fresh).
            deadline = 0
        } else if let expiresAfter {
            let (seconds, attoseconds) = expiresAfter.components
            let nanoseconds = max(0, seconds) * 1_000_000_000 + max(0, attoseconds) / 1_000_000_000
            deadline = MonotonicClock.now() &+ UInt64(nanoseconds)
        } else {
            deadline = .max
        }
        try backend.sendDatagram(payload, deadline: deadline)
    }

    /// For relays: from now on, received datagrams are handed to `handler` on the transport's event-loop thread as
    /// they arrive — no task hop, no buffering — instead of to `datagrams` (frames already buffered there stay
    /// there, except 0-RTT frames a server delivered at once under `EarlyDataPolicy.deliverEarlyDatagrams`: a
    /// handler installed before the handshake completed receives those first). The handler must return quickly and never block: it runs on the thread that serves every
    /// connection of this endpoint. Calling `sendDatagram` from it is the cheapest way to forward a frame.
    /// The handler is released when the connection closes.
    public func setDatagramHandler(_ handler: @escaping @Sendable (Datagram) -> Void) async {
        await backend.setDatagramHandler(handler)
    }

    /// The largest datagram payload that can be sent now (depends on the path MTU and the peer's limit).
    public var maxDatagramPayloadSize: Int { backend.maxDatagramPayloadSize }

    /// Counters and RTT estimates.
    public func statistics() async -> ConnectionStatistics { await backend.statistics() }

    /// Renews this connection's QUIC packet keys without a new handshake (a key update, RFC 9001 §6): the next
    /// packets use the next key phase and the relay follows. For calls that last long enough that a deployment
    /// wants fresh keys; audio and control messages keep flowing across it.
    ///
    /// - Throws: `TransportError` — `.keyUpdateNotReady` before the handshake is confirmed, or while the previous
    ///   update is not confirmed by the peer (or came less than three probe timeouts ago): retry shortly;
    ///   `.keyUpdateUnsupported` over TCP (QMux), which has no QUIC key phases; `.connectionClosed` once closed.
    ///   The connection stays up in every case.
    public func updateKeys() async throws { try await backend.updateKeys() }

    /// Closes the connection with an application error code (0 = normal) and a reason the peer sees.
    public func close(code: UInt64 = 0, reason: String = "") async {
        await backend.close(code: code, reason: reason)
    }
}

/// How a connection used saved resumption state.
public enum ResumptionStatus: Hashable, Sendable, CustomStringConvertible {
    /// A full handshake; nothing was resumed.
    case none
    /// TLS resumed from the saved ticket; `earlyData` says what happened to the 0-RTT messages.
    case resumed(earlyData: EarlyDataStatus)

    /// A client's status once its handshake completed, over QUIC or TCP: `earlyDataAccepted` is nil when no early
    /// data was sent.
    init(resumed: Bool, earlyDataAccepted: Bool?) {
        guard resumed else {
            self = .none
            return
        }
        switch earlyDataAccepted {
        case true?: self = .resumed(earlyData: .accepted)
        case false?: self = .resumed(earlyData: .rejected)
        case nil: self = .resumed(earlyData: .notAttempted)
        }
    }

    /// What a server saw once the handshake completed (or, for 0-RTT data, once the ClientHello was read). A
    /// server cannot tell early data it refused from none sent: both are `.notAttempted` there.
    init(serverResumed resumed: Bool, acceptedEarlyData: Bool) {
        self.init(resumed: resumed || acceptedEarlyData, earlyDataAccepted: acceptedEarlyData ? true : nil)
    }

    /// `not resumed`, or `resumed (early data accepted)` and the like.
    public var description: String {
        switch self {
        case .none: return "not resumed"
        case .resumed(let earlyData): return "resumed (early data \(earlyData))"
        }
    }
}

/// What happened to messages sent in 0-RTT.
public enum EarlyDataStatus: String, Hashable, Sendable, CustomStringConvertible {
    /// No early data was attempted.
    case notAttempted
    /// The server accepted the 0-RTT data.
    case accepted
    /// The server rejected 0-RTT; the transport re-sent the messages in 1-RTT.
    case rejected

    /// `not attempted`, `accepted` or `rejected`.
    public var description: String {
        switch self {
        case .notAttempted: return "not attempted"
        case .accepted: return "accepted"
        case .rejected: return "rejected"
        }
    }
}
