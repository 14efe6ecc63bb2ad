internal import CTransportShims
import Dispatch

/// Gives the memory that closed connections freed back to the system, a second after the last of a burst of
/// closes. glibc keeps freed memory in its arenas: without this, a relay's resident memory after an attack (or a
/// busy hour) stays at its peak although nothing uses it (300 attack connections: 86.6 MB resident after they
/// closed, 26.9 MB once released).
///
/// The release itself runs on a utility-priority Dispatch thread, never on the loop: it walks the whole heap, which in
/// a large process takes long enough to stall every call on the loop (a port-rebinding call's audio stopped for
/// 1.4 s in full test runs, a stall this is the likely cause of).
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
            DispatchQueue.global(qos: .utility).async { _ = ptt_release_free_heap() }
        }
    }
}
