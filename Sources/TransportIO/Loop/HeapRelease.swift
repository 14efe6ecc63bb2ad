internal import CTransportShims

/// Gives the memory that closed connections freed back to the system, a second after the last of a burst of
/// closes. glibc keeps freed memory in its arenas: without this, a relay's resident memory after an attack (or a
/// busy hour) stays at its peak although nothing uses it (300 attack connections: 86.6 MB resident after they
/// closed, 26.9 MB once released).
///
/// - Important: Loop-confined, like the server driver that owns it. At most one release per second per loop.
package final class HeapRelease {
    /// How long closes may keep coming before the release runs (a release walks the whole heap).
    package static let delay: UInt64 = 1_000_000_000
    private let loop: EventLoop
    private let timerID: Int
    private var scheduled = false

    package init(loop: EventLoop) {
        self.loop = loop
        timerID = loop.makeTimerID()
    }

    /// A connection's state is being freed: release the heap once the closes settle.
    package func connectionFreed() {
        guard !scheduled else { return }
        scheduled = true
        loop.schedule(timer: timerID, at: MonotonicClock.now() + Self.delay) { [weak self] in
            self?.scheduled = false
            _ = ptt_release_free_heap()
        }
    }
}
