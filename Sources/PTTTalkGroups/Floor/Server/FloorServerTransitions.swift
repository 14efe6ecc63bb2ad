/// The transitions of the floor control server, one method per TS 24.380 event, each switching on the state it
/// arrives in. "Floor control and liveness" in the DocC catalog lists them with their TS 24.380 names.
extension FloorServer {
    // MARK: Membership

    /// A participant joins ("U: not permitted and Floor Idle/Taken" entered), and is told the floor's state.
    mutating func participantJoins(_ member: Member, role: FloorRole, now: UInt64, into step: inout Step) {
        if participants[member] == nil {
            participants[member] = Participant(role: role)
            order.append(member)
        } else {
            participants[member]?.role = role
            // Now only listening, it gives up its place in the queue.
            if role == .receiveOnly, waiting.position(of: member) != nil {
                updatingQueue(into: &step) { $0.remove(member) }
            }
        }
        tellFloorState(to: member, now: now, into: &step)
    }

    /// A participant leaves: no message goes to it from here on.
    mutating func participantLeaves(_ member: Member, now: UInt64, into step: inout Step) {
        guard participants.removeValue(forKey: member) != nil else { return }
        order.removeAll { $0 == member }
        timers[.floorRevoke(member)] = nil
        if grant?.member == member {
            endFloor(.left, now: now, into: &step)
            enterFloorIdle(now: now, into: &step)
        } else if waiting.position(of: member) != nil {
            updatingQueue(into: &step) { $0.remove(member) }
        }
    }

    // MARK: Floor Request

    /// Floor Request: granted in "G: Floor Idle"; in "G: Floor Taken" or "G: pending Floor Revoke", granted at once
    /// when pre-emptive, else queued or denied.
    mutating func floorRequest(_ member: Member, _ asked: FloorRequest, now: UInt64, into step: inout Step) {
        guard let participant = participants[member] else {
            return deny(member, .other, into: &step)
        }
        let request = FloorRequest(
            priority: asked.priority, urgency: max(asked.urgency, callType.urgency), queueing: asked.queueing)
        if participant.role == .receiveOnly {
            return deny(member, .receiveOnly, into: &step)
        }
        if let grant, grant.member == member {
            // The holder asks again: it missed Floor Granted (or, being revoked, Floor Revoke).
            return tellFloorState(to: member, now: now, into: &step)
        }
        if request.urgency == .normal, participant.retryAfterUntil > now {
            return deny(member, .retryAfter(.floorNanoseconds(participant.retryAfterUntil - now)), into: &step)
        }
        guard resourcesAvailable else {
            return deny(member, .noResources, into: &step)
        }
        // Asking anew, a revoked member has understood its revoke.
        endPendingRevoke(of: member)
        switch state {
        case .floorIdle:
            grantFloor(to: member, request, now: now, into: &step)
        case .floorTaken, .pendingFloorRevoke:
            guard let holder = grant else { return }
            if preempts(request, holder.request) {
                preempt(holder.member, for: member, request, now: now, into: &step)
            } else {
                queueOrDeny(member, request, into: &step)
            }
        }
    }

    /// Whether `request` revokes a holder granted on `held`, by the group's policy: a more urgent request always; an
    /// equally urgent one of higher priority when both are urgent, or when it reaches the group's pre-emptive
    /// priority.
    func preempts(_ request: FloorRequest, _ held: FloorRequest) -> Bool {
        if request.urgency != held.urgency { return request.urgency > held.urgency }
        guard request.priority > held.priority else { return false }
        if request.urgency > .normal { return true }
        guard let threshold = configuration.preemptivePriority else { return false }
        return request.priority >= threshold
    }

    /// A request that does not pre-empt while the floor is taken: Floor Queue Position Info, or Floor Deny #1 or #7.
    private mutating func queueOrDeny(_ member: Member, _ request: FloorRequest, into step: inout Step) {
        let waits = waiting.position(of: member) != nil
        let queueing = callType != .broadcast && configuration.queueCapacity > 0 && request.queueing
        guard queueing else {
            if waits { updatingQueue(into: &step) { $0.remove(member) } }
            return deny(member, .anotherMemberHasPermission, into: &step)
        }
        guard waits || waiting.count < configuration.queueCapacity else {
            return deny(member, .queueFull, into: &step)
        }
        updatingQueue(into: &step, answering: member) { $0.enqueue(member, request) }
        if !waits, let position = waiting.position(of: member) {
            step.notices.append(.queued(member, position: position))
        }
    }

    private mutating func deny(_ member: Member, _ cause: FloorDenyCause, into step: inout Step) {
        step.send(.deny(cause), to: member)
        step.notices.append(.denied(member, cause))
    }

    /// A pre-emptive request: Floor Revoke (#4) to the holder, whose audio is refused from this step on, and the
    /// floor granted to the requester in the same step (TS 24.380's procedure for a group with audio cut-in).
    private mutating func preempt(
        _ holder: Member, for member: Member, _ request: FloorRequest, now: UInt64, into step: inout Step
    ) {
        step.send(.revoke(.preempted), to: holder)
        endFloor(.preempted(by: member), now: now, refusing: .preempted, into: &step)
        grantFloor(to: member, request, now: now, into: &step)
    }

    // MARK: Floor Release and queue position

    /// Floor Release: from the holder in "G: Floor Taken" or "G: pending Floor Revoke" the floor moves on; from a
    /// waiting member its request leaves the queue; from a revoked one its pending revoke ends.
    mutating func floorRelease(_ member: Member, now: UInt64, into step: inout Step) {
        guard participants[member] != nil else { return }
        if grant?.member == member {
            endFloor(state == .pendingFloorRevoke ? .stopTalking : .released, now: now, into: &step)
            enterFloorIdle(now: now, into: &step)
        } else if waiting.position(of: member) != nil {
            updatingQueue(into: &step) { $0.remove(member) }
        } else {
            endPendingRevoke(of: member)
        }
    }

    /// Floor Queue Position Request: Floor Queue Position Info to a waiting member; the floor's state to others.
    mutating func queuePositionRequest(_ member: Member, now: UInt64, into step: inout Step) {
        guard participants[member] != nil else { return }
        if let position = waiting.position(of: member), let entry = waiting.entry(of: member) {
            step.send(.queuePosition(position, priority: entry.request.priority), to: member)
        } else {
            tellFloorState(to: member, now: now, into: &step)
        }
    }

    // MARK: The application

    /// The application revokes the holder: Floor Revoke, the holder's audio refused from now on, the floor moves on.
    mutating func applicationRevokes(cause: FloorRevokeCause, now: UInt64, into step: inout Step) {
        guard let holder = grant?.member else { return }
        step.send(.revoke(cause), to: holder)
        endFloor(.revoked(cause), now: now, refusing: cause, into: &step)
        enterFloorIdle(now: now, into: &step)
    }

    /// No resources: the members waiting are denied (#6) and leave the queue.
    mutating func resourcesChange(available: Bool, into step: inout Step) {
        resourcesAvailable = available
        guard !available else { return }
        for entry in waiting.removeAll() { deny(entry.member, .noResources, into: &step) }
    }

    // MARK: Timers

    /// `timer`, due at `deadline`, fired at `now`.
    mutating func fire(_ timer: Timer, dueAt deadline: UInt64, now: UInt64, into step: inout Step) {
        switch timer {
        case .endOfMedia:
            // T1 in "G: Floor Taken": the floor moves on; in "G: pending Floor Revoke" the revoked holder fell silent.
            endFloor(state == .pendingFloorRevoke ? .stopTalking : .endOfMedia, now: now, into: &step)
            enterFloorIdle(now: now, into: &step)
        case .stopTalkingWarning:
            guard state == .floorTaken, let grant, let end = timers[.stopTalking] else { return }
            step.send(.stopTalkingWarning(remaining: .floorNanoseconds(end - min(end, now))), to: grant.member)
        case .stopTalking:
            stopTalkingExpires(now: now, into: &step)
        case .stopTalkingGrace:
            // T3: the grace is over; the holder's audio is refused from now on.
            guard state == .pendingFloorRevoke else { return }
            endFloor(.stopTalking, now: now, refusing: .mediaBurstTooLong, into: &step)
            enterFloorIdle(now: now, into: &step)
        case .floorGranted:
            floorGrantedExpires(now: now, into: &step)
        case .floorRevoke(let member):
            floorRevokeExpires(for: member, dueAt: deadline, now: now, into: &step)
        case .floorIdle:
            // T7: Floor Idle again to every member, up to C7 times.
            guard state == .floorIdle else { return }
            idleRepeats += 1
            for member in order { step.send(.idle, to: member) }
            if idleRepeats < configuration.floorIdleRepeats {
                arm(.floorIdle, now: now, after: times.floorIdleInterval)
            }
        case .inactivity:
            // T4: the application decides whether the call ends; the timer runs again.
            guard state == .floorIdle, let inactivity = times.inactivity else { return }
            step.notices.append(.inactive)
            arm(.inactivity, now: now, after: inactivity)
        }
    }

    /// T2 in "G: Floor Taken": Floor Revoke (#2) to the holder, T3 starts, "G: pending Floor Revoke"; its audio is
    /// still forwarded during the grace.
    private mutating func stopTalkingExpires(now: UInt64, into step: inout Step) {
        guard state == .floorTaken, let holder = grant?.member else { return }
        state = .pendingFloorRevoke
        timers[.stopTalkingWarning] = nil
        timers[.floorGranted] = nil
        arm(.stopTalkingGrace, now: now, after: times.stopTalkingGrace)
        participants[holder]?.revocation = Revocation(cause: .mediaBurstTooLong)
        step.send(.revoke(.mediaBurstTooLong), to: holder)
    }

    /// T20: Floor Granted again to a holder that has sent nothing yet, up to C20 times.
    private mutating func floorGrantedExpires(now: UInt64, into step: inout Step) {
        guard state == .floorTaken, var grant, !grant.heard else { return }
        grant.grantedRepeats += 1
        self.grant = grant
        step.send(grantedMessage(grant, now: now), to: grant.member)
        if grant.grantedRepeats < configuration.floorGrantedRepeats {
            arm(.floorGranted, now: now, after: times.floorGrantedInterval)
        }
    }

    /// T8 in "U: pending Floor Revoke": Floor Revoke again while the member still sends (a frame refused in the last
    /// half interval), up to ``FloorServerConfiguration/floorRevokeRepeats`` times, then the application is told;
    /// a member that stopped sending returns to "U: not permitted".
    private mutating func floorRevokeExpires(
        for member: Member, dueAt deadline: UInt64, now: UInt64, into step: inout Step
    ) {
        guard let revocation = participants[member]?.revocation else { return }
        let window = deadline - min(deadline, times.floorRevokeInterval / 2)
        guard let last = revocation.lastRefusedFrame, last > window else {
            return endPendingRevoke(of: member)
        }
        guard revocation.repeats < configuration.floorRevokeRepeats else {
            step.notices.append(.revokeIgnored(member))
            return endPendingRevoke(of: member)
        }
        participants[member]?.revocation?.repeats += 1
        step.send(.revoke(revocation.cause), to: member)
        arm(.floorRevoke(member), now: now, after: times.floorRevokeInterval)
    }

    // MARK: Entering states

    /// Enters "G: Floor Taken" with `member`: Floor Granted to it, Floor Taken (its identity) to every other member;
    /// T1, T2 (and its warning) and T20 start, T4 and T7 stop; a member behind it in the queue moves up.
    private mutating func grantFloor(to member: Member, _ request: FloorRequest, now: UInt64, into step: inout Step) {
        let grant = Grant(member: member, request: request, grantedAt: now, lastMedia: now)
        self.grant = grant
        state = .floorTaken
        endPendingRevoke(of: member)
        timers[.inactivity] = nil
        timers[.floorIdle] = nil
        if let stopTalking = times.stopTalking { arm(.stopTalking, now: now, after: stopTalking) }
        if let warning = times.warningAfterGrant { arm(.stopTalkingWarning, now: now, after: warning) }
        if configuration.floorGrantedRepeats > 0 { arm(.floorGranted, now: now, after: times.floorGrantedInterval) }
        step.send(grantedMessage(grant, now: now), to: member)
        let taken = Message.taken(by: member, urgency: request.urgency, mayRequest: callType != .broadcast)
        for other in order where other != member { step.send(taken, to: other) }
        step.notices.append(.granted(member, request))
        if waiting.position(of: member) != nil { updatingQueue(into: &step) { $0.remove(member) } }
    }

    /// The holder loses the floor for `reason`: its timers stop; with `refusing`, it enters "U: pending Floor Revoke"
    /// (its audio refused, T8 running). The caller then enters "G: Floor Idle" or grants the floor.
    private mutating func endFloor(
        _ reason: ReleaseReason, now: UInt64, refusing cause: FloorRevokeCause? = nil, into step: inout Step
    ) {
        guard let ended = grant else { return }
        grant = nil
        for timer in [Timer.stopTalking, .stopTalkingWarning, .stopTalkingGrace, .floorGranted] { timers[timer] = nil }
        step.notices.append(.released(ended.member, reason))
        guard participants[ended.member] != nil else { return }
        if reason == .stopTalking {
            let until = later(now, times.retryAfter)
            participants[ended.member]?.retryAfterUntil = until
        }
        if let cause {
            participants[ended.member]?.revocation = Revocation(cause: cause)
            arm(.floorRevoke(ended.member), now: now, after: times.floorRevokeInterval)
        } else {
            endPendingRevoke(of: ended.member)
        }
    }

    /// Enters "G: Floor Idle" once the holder is gone: the first member waiting is granted the floor ("G: Floor
    /// Taken"); with nobody waiting, Floor Idle to every member, T7 (when repeated) and T4 start.
    private mutating func enterFloorIdle(now: UInt64, into step: inout Step) {
        if resourcesAvailable, let next = waiting.entries.first {
            return grantFloor(to: next.member, next.request, now: now, into: &step)
        }
        state = .floorIdle
        for member in order { step.send(.idle, to: member) }
        idleRepeats = 0
        if configuration.floorIdleRepeats > 0 { arm(.floorIdle, now: now, after: times.floorIdleInterval) }
        if let inactivity = times.inactivity { arm(.inactivity, now: now, after: inactivity) }
    }

    /// "U: pending Floor Revoke" ends: the member is "U: not permitted" again.
    private mutating func endPendingRevoke(of member: Member) {
        participants[member]?.revocation = nil
        timers[.floorRevoke(member)] = nil
    }

    // MARK: Messages

    /// The floor's state for one member: its Floor Granted (or, in the grace, Floor Revoke), Floor Taken with the
    /// holder's identity and its queue position, or Floor Idle.
    private func tellFloorState(to member: Member, now: UInt64, into step: inout Step) {
        guard let grant else { return step.send(.idle, to: member) }
        if grant.member == member {
            let message = state == .pendingFloorRevoke ? .revoke(.mediaBurstTooLong) : grantedMessage(grant, now: now)
            return step.send(message, to: member)
        }
        step.send(
            .taken(by: grant.member, urgency: grant.request.urgency, mayRequest: callType != .broadcast), to: member)
        if let position = waiting.position(of: member), let entry = waiting.entry(of: member) {
            step.send(.queuePosition(position, priority: entry.request.priority), to: member)
        }
    }

    /// Floor Granted with what is left of T2.
    private func grantedMessage(_ grant: Grant, now: UInt64) -> Message {
        let left = times.stopTalking.map { stopTalking -> Duration in
            let end = later(grant.grantedAt, stopTalking)
            return .floorNanoseconds(end - min(end, now))
        }
        return .granted(duration: left, priority: grant.request.priority, urgency: grant.request.urgency)
    }

    /// Applies `change` to the queue, then sends Floor Queue Position Info to every waiting member whose position
    /// changed (and to `answering`, which asked).
    private mutating func updatingQueue(
        into step: inout Step, answering requester: Member? = nil, _ change: (inout FloorQueue<Member>) -> Void
    ) {
        var before: [Member: Int] = [:]
        for (index, entry) in waiting.entries.enumerated() { before[entry.member] = index }
        change(&waiting)
        for (index, entry) in waiting.entries.enumerated()
        where before[entry.member] != index || entry.member == requester {
            step.send(.queuePosition(index + 1, priority: entry.request.priority), to: entry.member)
        }
    }
}
