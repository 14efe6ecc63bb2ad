import TransportIO

/// One timer of a channel's loop, made on first use (a loop makes timer identities on its own thread), armed for a
/// deadline and cancelled with the channel: the liveness check's and the catch-up pacer's.
///
/// Loop-confined: every method runs on the loop's thread.
final class LoopTimer {
    private var id: Int?

    /// Arms the timer for `deadline` (MonotonicClock) on `loop`; `fired` runs there when it is due (installed
    /// the first time only: it must not capture what it outlives).
    func arm(on loop: EventLoop, at deadline: UInt64, _ fired: @escaping () -> Void) {
        let timer: Int
        if let id {
            timer = id
        } else {
            timer = loop.makeTimerID()
            id = timer
            loop.setTimerHandler(timer, fired)
        }
        loop.arm(timer: timer, at: deadline)
    }

    /// Cancels the timer (it may be armed again).
    func cancel(on loop: EventLoop) {
        if let id { loop.cancelTimer(id) }
        id = nil
    }
}
