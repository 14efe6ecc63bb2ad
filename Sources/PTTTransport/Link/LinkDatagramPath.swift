import TransportCore
import TransportIO

/// Counters of a link's datagram path (`TransportLink.datagramStatistics`), over every connection it made.
public struct LinkDatagramStatistics: Hashable, Sendable {
    /// Frames `sendDatagram` handed to a ready connection.
    public var sent: UInt64 = 0
    /// Frames `sendDatagram` dropped because no connection was ready (connecting, reconnecting, suspended), or
    /// because the connection closed as the frame was handed to it. Never queued: audio is stale a moment later.
    public var droppedWhileReconnecting: UInt64 = 0
    /// Frames received on any of the link's connections and put on `datagrams`.
    public var received: UInt64 = 0
    /// Received frames dropped because the app read `datagrams` too slowly (the oldest go first).
    public var droppedUnread: UInt64 = 0

    /// All zero.
    public init() {}
}

/// Received audio datagrams of a link, from each successive connection in turn (see `TransportLink.datagrams`).
/// Bounded like a connection's own sequence: when the app falls behind, the oldest are dropped and counted in
/// `LinkDatagramStatistics.droppedUnread`. Each datagram goes to one reader; a loop whose task is cancelled ends
/// (nil) and later datagrams wait for the next loop.
public struct LinkDatagrams: AsyncSequence, Sendable {
    /// A received datagram.
    public typealias Element = Datagram
    let path: LinkDatagramPath

    /// Takes the link's next received datagram on every call.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let base: Mailbox<Datagram>
        /// The next datagram, from whichever connection the link has; nil once the link stopped (and the
        /// datagrams already received were read), or when the task is cancelled.
        public mutating func next() async -> Datagram? { await base.next() }
    }

    /// An iterator taking the next datagrams not yet taken. The first one made starts the link's forwarding of
    /// its connections' datagrams.
    public func makeAsyncIterator() -> AsyncIterator {
        path.want()
        return AsyncIterator(base: path.mailbox)
    }
}

/// The datagram path of a link: frames from each connection it makes forwarded into one mailbox that lives as
/// long as the link, and frames sent on whichever connection is ready (dropped and counted otherwise).
final class LinkDatagramPath: Sendable {
    private struct State {
        /// Which connection to forward from.
        var follower = LinkFollower()
        /// The largest payload the last ready connection took (checked while the link reconnects).
        var lastMaximum: Int?
        var statistics = LinkDatagramStatistics()
        /// When each connection a move retires last delivered a frame (`retiring` to `retired`).
        var lastDelivered: [TransportConnection.ID: ContinuousClock.Instant] = [:]
    }

    let mailbox: Mailbox<Datagram>
    private let state = Locked(State())

    init(capacity: Int) { mailbox = Mailbox(capacity: capacity) }

    var statistics: LinkDatagramStatistics { state.withLock { $0.statistics } }

    /// The link has a new ready connection; `sink`: the one its driver delivers to already (`directSink()`).
    func attach(_ connection: TransportConnection, sink: LinkDatagramSink? = nil) {
        sink?.attached(driver: connection.backend, connection: connection.id)
        let start = state.withLock { state -> TransportConnection? in
            state.lastMaximum = connection.maxDatagramPayloadSize
            return state.follower.attach(connection, followedAlready: sink != nil)
        }
        if let start { forward(start) }
    }

    /// A sink for the link's next connection when an app reads `datagrams` (nil otherwise: the connection keeps
    /// its frames until `want()`).
    func directSink() -> LinkDatagramSink? {
        guard state.withLock({ $0.follower.isWanted }) else { return nil }
        return LinkDatagramSink { [mailbox, state] datagram, connection in
            let kept = mailbox.send(datagram)
            state.withLock { state in
                state.statistics.received += 1
                if !kept { state.statistics.droppedUnread += 1 }
                if let connection, state.lastDelivered[connection] != nil { state.lastDelivered[connection] = .now }
            }
        }
    }

    /// The link's connection ended (or was replaced).
    func detach(_ connection: TransportConnection) {
        state.withLock { $0.follower.detach(connection) }
    }

    /// A move replaced `connection`: it sends no more, but what its relay still sends keeps arriving on
    /// `datagrams` until `retired` (watched by `quietSince`).
    func retiring(_ connection: TransportConnection) {
        state.withLock { $0.lastDelivered[connection.id] = .now }
    }

    /// When a retiring connection last delivered a frame (or began retiring).
    func quietSince(_ connection: TransportConnection) -> ContinuousClock.Instant? {
        state.withLock { $0.lastDelivered[connection.id] }
    }

    /// A retired connection is closed: forget it.
    func retired(_ connection: TransportConnection) {
        _ = state.withLock { $0.lastDelivered.removeValue(forKey: connection.id) }
    }

    /// An app reads `datagrams`: forward from now on, starting with the connection the link has now.
    func want() {
        if let connection = state.withLock({ $0.follower.want() }) { forward(connection) }
    }

    /// The link stopped: readers get what was received, then nil.
    func finish() { mailbox.finish() }

    /// Moves `connection`'s frames into the link's mailbox until the connection closes.
    private func forward(_ connection: TransportConnection) {
        Task { [mailbox, state] in
            for await datagram in connection.datagrams {
                let kept = mailbox.send(datagram)
                state.withLock { state in
                    state.statistics.received += 1
                    if !kept { state.statistics.droppedUnread += 1 }
                    if state.lastDelivered[connection.id] != nil { state.lastDelivered[connection.id] = .now }
                }
            }
        }
    }

    /// Sends on `connection` when it is ready; otherwise (or if it closes under the frame) drops and counts the
    /// frame. Empty or oversized frames throw as the connection's `sendDatagram` does, checked against the last
    /// connection's maximum while the link reconnects.
    func send(_ payload: [UInt8], expiresAfter: Duration?, on connection: TransportConnection?) throws {
        guard let connection, connection.status == .ready else {
            try DatagramQueue.checkPayload(payload, maximum: state.withLock { $0.lastMaximum })
            state.withLock { $0.statistics.droppedWhileReconnecting += 1 }
            return
        }
        do {
            try connection.sendDatagram(payload, expiresAfter: expiresAfter)
            state.withLock { $0.statistics.sent += 1 }
        } catch let error as TransportError where Self.refusals.contains(error.code) {
            throw error
        } catch {
            state.withLock { $0.statistics.droppedWhileReconnecting += 1 }  // closed as we sent: the link reconnects
        }
    }

    /// Errors about the frame itself, which the caller must see; any other error is the connection's end.
    private static let refusals: Set<TransportError.Code> = [.datagramEmpty, .datagramTooLarge, .datagramsUnsupported]
}
