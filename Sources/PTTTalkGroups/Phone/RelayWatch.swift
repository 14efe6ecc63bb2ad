import PTTTransport
import TransportCore
import TransportIO

/// A phone's watch on its relay while a burst is under way: mid-burst a frame is due every 20 ms, so silence
/// without a floor release is suspicious. After `silence` without a frame the phone sends the relay one probe (a
/// QUIC PING, or a QMux QX_PING), which a live relay's stack answers within a round trip; if nothing at all arrives
/// from the relay within `answerWithin` of the probe, the relay is dead or hung and the connection is closed
/// (`unresponsiveCloseCode`), so the link leaves `.ready` and reconnects (to another address of the name when it
/// has one), with `reconnecting` saying why. Between bursts nothing is probed: the link's keep-alive and the
/// transport's idle timeout watch the idle connection, at no extra battery cost.
final class RelayWatch: Sendable {
    private struct State {
        /// When the burst began or its last frame arrived (monotonic nanoseconds); nil: no burst under way.
        var lastFrame: UInt64?
        /// When the probe under way was sent.
        var probeAt: UInt64?
        /// The task watching the burst under way.
        var task: Task<Void, Never>?
    }

    private let state = Locked(State())
    private let link: TransportLink
    private let silence: UInt64
    private let answerWithin: UInt64
    /// How often the watch looks, while a burst is under way.
    private let tick: Duration

    init(link: TransportLink, check: LivenessCheck) {
        self.link = link
        silence = check.silence.nanoseconds
        answerWithin = check.answerWithin.nanoseconds
        tick = min(.milliseconds(50), check.silence / 5)
    }

    deinit { state.withLock { $0.task?.cancel() } }

    /// Another member's burst began (or the phone joined mid-burst): frames are due from now on.
    func burstStarted() {
        let now = MonotonicClock.now()
        state.withLock { state in
            state.lastFrame = now
            state.probeAt = nil
            guard state.task == nil else { return }
            state.task = Task { [weak self] in await self?.watch() }
        }
    }

    /// A frame arrived.
    func frameHeard() {
        let now = MonotonicClock.now()
        state.withLock { state in
            guard state.lastFrame != nil else { return }
            state.lastFrame = now
            state.probeAt = nil
        }
    }

    /// The burst ended (a floor release), or the connection went: nothing is due.
    func burstEnded() {
        state.withLock { state in
            state.lastFrame = nil
            state.probeAt = nil
            state.task?.cancel()
            state.task = nil
        }
    }

    private func watch() async {
        while !Task.isCancelled {
            try? await Task.sleep(for: tick)
            guard let connection = link.connection else { continue }  // reconnecting: the link watches
            let now = MonotonicClock.now()
            enum Verdict { case fine, probe, dead }
            let verdict = state.withLock { state -> Verdict in
                guard let lastFrame = state.lastFrame, now &- lastFrame >= silence else { return .fine }
                guard let probeAt = state.probeAt else {
                    state.probeAt = now
                    return .probe
                }
                let sinceProbe = now &- probeAt
                if connection.timeSinceLastActivity.nanoseconds < sinceProbe {
                    // Something came after the probe: the relay lives (the talker paused). Look again after
                    // another `silence`.
                    state.lastFrame = now
                    state.probeAt = nil
                    return .fine
                }
                return sinceProbe >= answerWithin ? .dead : .fine
            }
            switch verdict {
            case .fine: continue
            case .probe: connection.backend.probeLiveness()
            case .dead:
                burstEnded()
                await connection.close(
                    code: unresponsiveCloseCode, reason: "the relay stopped answering mid-burst (no frame, no answer)")
                return
            }
        }
    }
}
