import PTTTransport
import TransportIO

/// One loop's share of a channel's `LivenessCheck`: the members on that loop that were sending audio, probed once
/// their audio stops and removed when they do not answer. Driven by one timer per loop, armed for the earliest thing
/// to check (a frame re-arms nothing while its sender is watched already).
///
/// Loop-confined: every method runs on `owner.loop`'s thread (it is part of `ChannelMembers`).
final class LivenessWatch {
    private let silence: UInt64
    private let answerWithin: UInt64
    /// The members watched, with their connections (to probe and to close).
    private var watched: [(connection: TransportConnection, membership: ChannelMembership)] = []
    /// The QUIC listeners watched: sent audio, and not heard from since.
    private var listeners: [(connection: TransportConnection, membership: ChannelMembership)] = []
    /// The loop timer.
    private let timer = LoopTimer()
    /// Its deadline, nil when disarmed.
    private var armedAt: UInt64?

    init(_ check: LivenessCheck) {
        silence = max(1_000_000, check.silence.nanoseconds)
        answerWithin = max(1_000_000, check.answerWithin.nanoseconds)
    }

    /// A frame from `membership` at `now` (forwarded or refused: either way the member is talking).
    func frame(from membership: ChannelMembership, now: UInt64, in owner: ChannelMembers) {
        membership.lastFrame = now
        guard !membership.watched, let connection = owner.connection(of: membership) else { return }
        membership.watched = true
        membership.probeSince = nil
        watched.append((connection, membership))
        arm(at: now &+ silence, on: owner)
    }

    /// A frame was sent to `membership` at `now`. A QUIC listener's stack acknowledges the audio it is sent within
    /// a round trip and its ACK delay, so a listener heard from since is alive at no cost; one silent for `silence`
    /// while being sent audio is probed, and removed when it does not answer. Over TCP nothing at the transport's
    /// level answers the audio, and the kernel notices a vanished peer: TCP listeners are not watched.
    func sent(
        to membership: ChannelMembership, via connection: TransportConnection, now: UInt64, in owner: ChannelMembers
    ) {
        guard connection.path == .quic else { return }
        if let since = membership.awaitingSince, connection.activity.lastHeard <= since {
            // still waiting to hear from it since `since`
        } else {
            membership.awaitingSince = now
        }
        guard !membership.listenWatched else { return }
        membership.listenWatched = true
        membership.listenProbeSince = nil
        listeners.append((connection, membership))
        arm(at: now &+ silence, on: owner)
    }

    /// The timer fired: probes members whose audio stopped, forgets those that answered, removes those that did not.
    private func check(_ owner: ChannelMembers) {
        armedAt = nil
        let now = MonotonicClock.now()
        var next = UInt64.max
        var lost: [(connection: TransportConnection, membership: ChannelMembership)] = []
        checkListeners(owner, now: now, next: &next, lost: &lost)
        watched.removeAll { entry in
            let membership = entry.membership
            if membership.channel !== owner { return true }  // it left (`add` reset its marks if it moved)
            let done: Bool
            if let since = membership.probeSince {
                if entry.connection.activity.lastHeard > since {
                    done = true  // answered: alive
                } else if now >= since &+ answerWithin {
                    lost.append(entry)
                    done = true
                } else {
                    next = min(next, since &+ answerWithin)
                    done = false
                }
            } else if now >= membership.lastFrame &+ silence {
                membership.probeSince = now
                entry.connection.backend.probeLiveness()
                next = min(next, now &+ answerWithin)
                done = false
            } else {
                next = min(next, membership.lastFrame &+ silence)
                done = false
            }
            if done {
                membership.watched = false
                membership.probeSince = nil
            }
            return done
        }
        for entry in lost {
            owner.remove(entry.membership, reason: .unresponsive)
            entry.connection.backend.closeSoon(
                code: unresponsiveCloseCode,
                reason: "no answer to a liveness probe within \(answerWithin / 1_000_000) ms")
        }
        if next != .max { arm(at: next, on: owner) }
    }

    /// The QUIC listeners: heard from since their first unanswered frame (alive: unwatched until the next frame),
    /// silent for `silence` (probed), or silent after a probe for `answerWithin` (lost).
    private func checkListeners(
        _ owner: ChannelMembers, now: UInt64, next: inout UInt64,
        lost: inout [(connection: TransportConnection, membership: ChannelMembership)]
    ) {
        listeners.removeAll { entry in
            let membership = entry.membership
            let heard = entry.connection.activity.lastHeard
            var done = membership.channel !== owner
            if !done, let since = membership.awaitingSince {
                if let probe = membership.listenProbeSince {
                    if heard > probe {
                        done = true
                    } else if now >= probe &+ answerWithin {
                        lost.append(entry)
                        done = true
                    } else {
                        next = min(next, probe &+ answerWithin)
                    }
                } else if heard > since {
                    done = true  // it acknowledged the audio: alive
                } else if now >= since &+ silence {
                    membership.listenProbeSince = now
                    entry.connection.backend.probeLiveness()
                    next = min(next, now &+ answerWithin)
                } else {
                    next = min(next, since &+ silence)
                }
            } else {
                done = true
            }
            if done {
                membership.listenWatched = false
                membership.listenProbeSince = nil
                membership.awaitingSince = nil
            }
            return done
        }
    }

    private func arm(at deadline: UInt64, on owner: ChannelMembers) {
        if let armedAt, armedAt <= deadline { return }
        armedAt = deadline
        timer.arm(on: owner.loop, at: deadline) { [weak self, weak owner] in
            if let self, let owner { self.check(owner) }
        }
    }

    /// Stops the timer and forgets every member (the channel emptied).
    func stop(on loop: EventLoop) {
        for entry in watched {
            entry.membership.watched = false
            entry.membership.probeSince = nil
        }
        watched.removeAll()
        for entry in listeners {
            entry.membership.listenWatched = false
            entry.membership.listenProbeSince = nil
            entry.membership.awaitingSince = nil
        }
        listeners.removeAll()
        timer.cancel(on: loop)
        armedAt = nil
    }
}
