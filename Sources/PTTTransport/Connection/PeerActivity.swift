import Synchronization
import TransportIO

/// When a connection last heard from its peer: the one place both drivers report reads to, for
/// `TransportConnection.timeSinceLastActivity` and a relay channel's liveness checks.
///
/// Each driver reports once per pass over its input (`heard(at:)` with its core's time of the last packet or record
/// read); anyone reads it, from any thread, without a lock.
package final class PeerActivity: Sendable {
    /// MonotonicClock nanoseconds of the last read; the connection's creation until the first one.
    private let last: Atomic<UInt64>

    init() { last = Atomic(MonotonicClock.now()) }

    /// Loop thread: the peer was last heard at `instant` (MonotonicClock); an older instant changes nothing.
    func heard(at instant: UInt64) {
        if instant > last.load(ordering: .relaxed) { last.store(instant, ordering: .relaxed) }
    }

    /// When the peer was last heard (MonotonicClock nanoseconds).
    package var lastHeard: UInt64 { last.load(ordering: .relaxed) }
}
