import PTTTalkGroups
import Testing
import TransportCore

/// Seeded random runs of `FloorServer`: members join, leave, ask, release, send frames, are revoked, and time passes
/// with every timer firing, under random policies and timers. After every step: at most one holder; every member's
/// last floor message names the holder; every waiting member was told its current position; no message to a member
/// that left; pre-emption exactly when the policy says; only the holder's frames forwarded; no timer in the past.
@Suite("Floor server properties")
struct FloorServerPropertyTests {
    static let pool = ["a", "b", "c", "d", "e", "f"]

    @Test func randomRunsKeepTheFloorsInvariants() {
        var seen = Coverage()
        for seed in UInt64(0)..<150 { Self.run(seed: seed, coverage: &seen) }
        // The runs went everywhere the checks look: every kind of message and notice, every state.
        #expect(seen.missing.isEmpty, "never seen: \(seen.missing)")
    }

    static func run(seed: UInt64, coverage: inout Coverage) {
        var random = SplitMix64(seed: 0xF100_0000 + seed)
        let configuration = Self.configuration(&random)
        let bed = FloorBed(configuration)
        var observer = FloorObserver()
        for _ in 0..<400 {
            let member = Self.pool.randomElement(using: &random)!
            let before = Snapshot(bed)
            var request: FloorRequest?
            let step: NamedFloor.Step
            switch Int.random(in: 0..<100, using: &random) {
            case 0..<12:
                step = bed.join(
                    member, role: Int.random(in: 0..<8, using: &random) == 0 ? .receiveOnly : .transmitAndReceive)
            case 12..<17:
                step = bed.leave(member)
            case 17..<42:
                let asked = Self.request(&random)
                request = asked
                step = bed.request(member, asked)
            case 42..<52:
                step = bed.release(member)
            case 52..<72:
                // Frames: a burst from the holder or anyone; only the holder's are forwarded.
                for _ in 0..<Int.random(in: 1...5, using: &random) {
                    let sender = Bool.random(using: &random) ? (bed.holder ?? member) : member
                    let holder = bed.holder
                    let forwarded = bed.frame(sender)
                    #expect(
                        forwarded == (sender == holder),
                        "seed \(seed): a frame of \(sender), holder \(String(describing: holder))")
                }
                step = NamedFloor.Step()
            case 72..<90:
                step = bed.advance(UInt64.random(in: 0...1_500, using: &random))
            case 90..<93:
                step = bed.revoke(FloorRevokeCause.allCases.randomElement(using: &random)!)
            case 93..<96:
                step = bed.queuePositionRequest(member)
            case 96..<98:
                step = bed.setResources(available: !bed.server.resourcesAvailable || Bool.random(using: &random))
            default:
                bed.setCallType(FloorCallType.allCases.randomElement(using: &random)!)
                step = NamedFloor.Step()
            }
            observer.check(step, after: before, request: request.map { (member, $0) }, bed: bed, seed: seed)
            coverage.record(step, bed.server)
        }
    }

    /// Garbage in: durations of zero, negative and beyond any clock; negative counts; times that go backwards and
    /// reach the clock's last instant; members never in the call. Nothing traps, `expire` returns with no timer left
    /// due, and the floor keeps one holder at most.
    @Test func hostileInputsNeitherTrapNorHang() {
        let forever = Duration.seconds(Int64.max)
        let configurations = [
            FloorServerConfiguration(
                queueCapacity: -3, preemptivePriority: 0, endOfMedia: .zero, stopTalking: .seconds(-5),
                stopTalkingWarning: .seconds(999), stopTalkingGrace: .zero, retryAfter: .seconds(-1), inactivity: .zero,
                floorIdleInterval: .zero, floorIdleRepeats: -1, floorRevokeInterval: .zero, floorRevokeRepeats: -2,
                floorGrantedInterval: .zero, floorGrantedRepeats: 1_000),
            FloorServerConfiguration(
                queueCapacity: Int.max, endOfMedia: forever, stopTalking: forever, stopTalkingWarning: forever,
                stopTalkingGrace: forever, retryAfter: forever, inactivity: forever, floorIdleInterval: forever,
                floorIdleRepeats: Int.max, floorRevokeInterval: forever, floorRevokeRepeats: Int.max,
                floorGrantedInterval: forever, floorGrantedRepeats: Int.max),
        ]
        let members = Self.pool + ["", "stranger"]
        for (index, configuration) in configurations.enumerated() {
            for start in [0, UInt64.max - ms(10), UInt64.max] {
                var random = SplitMix64(seed: UInt64(index) &* 31 &+ start)
                var server = FloorServer<String>(configuration: configuration, now: start)
                for _ in 0..<2_000 {
                    let now = [
                        0, start, start &- ms(5), start &+ ms(5), .max, UInt64.random(in: 0 ... .max, using: &random),
                    ]
                    .randomElement(using: &random)!
                    let member = members.randomElement(using: &random)!
                    switch Int.random(in: 0..<9, using: &random) {
                    case 0:
                        _ = server.join(
                            member, role: Bool.random(using: &random) ? .receiveOnly : .transmitAndReceive, now: now)
                    case 1: _ = server.leave(member, now: now)
                    case 2: _ = server.request(member, Self.request(&random), now: now)
                    case 3: _ = server.release(member, now: now)
                    case 4: _ = server.queuePositionRequest(member, now: now)
                    case 5: _ = server.revoke(cause: .noResources, now: now)
                    case 6: _ = server.setResources(available: Bool.random(using: &random), now: now)
                    case 7: _ = server.receiveMedia(from: member, now: now)
                    default:
                        _ = server.expire(now: now)
                        #expect(server.nextDeadline.map { $0 > now } ?? true, "no timer left due")
                    }
                    let holders = server.members.filter { server.participantState(of: $0) == .permitted }
                    #expect(holders.count <= 1 && (server.state == .floorIdle) == (server.holder == nil))
                }
            }
        }
    }

    static func configuration(_ random: inout SplitMix64) -> FloorServerConfiguration {
        func milliseconds(_ range: ClosedRange<Int64>) -> Duration {
            .milliseconds(Int64.random(in: range, using: &random))
        }
        return FloorServerConfiguration(
            callType: FloorCallType.allCases.randomElement(using: &random)!,
            queueCapacity: Int.random(in: 0...4, using: &random),
            preemptivePriority: Bool.random(using: &random) ? nil : [1, 100, 200, 255].randomElement(using: &random)!,
            endOfMedia: milliseconds(200...4_000),
            stopTalking: Bool.random(using: &random) ? nil : milliseconds(500...6_000),
            stopTalkingWarning: Bool.random(using: &random) ? nil : milliseconds(100...3_000),
            stopTalkingGrace: milliseconds(100...2_000), retryAfter: milliseconds(0...3_000),
            inactivity: Bool.random(using: &random) ? nil : milliseconds(500...5_000),
            floorIdleInterval: milliseconds(100...1_000), floorIdleRepeats: Int.random(in: 0...3, using: &random),
            floorRevokeInterval: milliseconds(100...1_000), floorRevokeRepeats: Int.random(in: 0...3, using: &random),
            floorGrantedInterval: milliseconds(100...1_000), floorGrantedRepeats: Int.random(in: 0...3, using: &random))
    }

    static func request(_ random: inout SplitMix64) -> FloorRequest {
        let urgency: FloorUrgency
        switch Int.random(in: 0..<10, using: &random) {
        case 0: urgency = .emergency
        case 1: urgency = .imminentPeril
        default: urgency = .normal
        }
        return FloorRequest(
            priority: [0, 1, 5, 100, 200, 255].randomElement(using: &random)!, urgency: urgency,
            queueing: Int.random(in: 0..<6, using: &random) != 0)
    }
}

/// What the checks need of the server before a step.
struct Snapshot {
    let holder: String?
    let holderRequest: FloorRequest?
    let members: Set<String>
    let callType: FloorCallType
    let resourcesAvailable: Bool

    init(_ bed: FloorBed) {
        holder = bed.holder
        holderRequest = bed.server.holderRequest
        members = Set(bed.server.members)
        callType = bed.server.callType
        resourcesAvailable = bed.server.resourcesAvailable
    }
}

/// The members' view of the floor, built only from the messages they were sent, checked against the server.
struct FloorObserver {
    /// What a member was last told about who holds the floor.
    enum Belief: Equatable {
        case idle
        case holds(String)
        /// It held the floor and was sent Floor Revoke.
        case stop
    }

    var beliefs: [String: Belief] = [:]
    var toldPositions: [String: Int] = [:]

    mutating func check(
        _ step: NamedFloor.Step, after before: Snapshot, request: (member: String, request: FloorRequest)?,
        bed: FloorBed,
        seed: UInt64
    ) {
        let server = bed.server
        let context = Comment(rawValue: "seed \(seed) at \(bed.now)")
        // No message to a member that is not in the call, but the answer to its own request.
        for delivery in step.messages where !server.isMember(delivery.member) {
            #expect(
                request?.member == delivery.member && delivery.message == .deny(.other)
                    && !before.members.contains(delivery.member),
                context)
        }
        for member in before.members.subtracting(server.members) {
            beliefs[member] = nil
            toldPositions[member] = nil
        }
        for delivery in step.messages where server.isMember(delivery.member) { learn(delivery) }

        // No timer left due: the bed fires what falls due, and inputs arm timers in the future.
        #expect(server.nextDeadline.map { $0 > bed.now } ?? true, context)
        // At most one holder, in the call, not waiting; an idle floor has nobody waiting.
        let permitted = server.members.filter {
            server.participantState(of: $0) == .permitted
                || ($0 == server.holder && server.participantState(of: $0) == .pendingFloorRevoke)
        }
        #expect(permitted.count == (server.holder == nil ? 0 : 1), context)
        #expect((server.state == .floorIdle) == (server.holder == nil), context)
        if let holder = server.holder { #expect(server.isMember(holder) && !server.queue.contains(holder), context) }
        if server.state == .floorIdle { #expect(server.queue.isEmpty, context) }
        #expect(
            server.queue.allSatisfy(server.isMember) && server.queue.count <= server.configuration.queueCapacity,
            context)

        // Every member knows who holds the floor (the granted party's identity), the holder in its grace that it
        // was revoked.
        for member in server.members {
            let expected: Belief
            if let holder = server.holder {
                expected = holder == member && server.state == .pendingFloorRevoke ? .stop : .holds(holder)
            } else {
                expected = .idle
            }
            #expect(
                beliefs[member] == expected, "\(member) believes \(String(describing: beliefs[member])), \(context)")
        }
        // Every waiting member was told its position whenever it changed.
        for (index, member) in server.queue.enumerated() {
            #expect(toldPositions[member] == index + 1, "\(member) waits at \(index + 1), \(context)")
        }

        // Pre-emption exactly when the policy says, and only on a request.
        let preemptions = step.notices.compactMap { notice -> (String, String)? in
            if case .released(let holder, .preempted(let by)) = notice { return (holder, by) }
            return nil
        }
        guard let request, let held = before.holderRequest, let holder = before.holder else {
            #expect(preemptions.isEmpty, context)
            return
        }
        let effective = FloorRequest(
            priority: request.request.priority, urgency: max(request.request.urgency, before.callType.urgencyForTest),
            queueing: request.request.queueing)
        let eligible =
            before.members.contains(request.member) && request.member != holder && before.resourcesAvailable
            && server.role(of: request.member) == .transmitAndReceive
            && !step.messages.contains { if case .deny(.retryAfter) = $0.message { true } else { false } }
        let policy = Self.policyPreempts(effective, over: held, threshold: server.configuration.preemptivePriority)
        if preemptions.isEmpty {
            #expect(!(eligible && policy), "a request the policy calls pre-emptive was not, \(context)")
        } else {
            #expect(preemptions.count == 1 && preemptions[0] == (holder, request.member) && eligible && policy, context)
        }
    }

    private mutating func learn(_ delivery: NamedFloor.Delivery) {
        let member = delivery.member
        switch delivery.message {
        case .granted: beliefs[member] = .holds(member)
        case .taken(let holder, _, _): beliefs[member] = .holds(holder)
        case .idle: beliefs[member] = .idle
        case .revoke: if beliefs[member] == .holds(member) { beliefs[member] = .stop }
        case .queuePosition(let position, _): toldPositions[member] = position
        case .deny, .stopTalkingWarning: break
        }
    }

    /// The group's pre-emption policy, written out: a more urgent request pre-empts; a less urgent one never; an
    /// equally urgent one needs a higher priority and, for a normal call, the group's pre-emptive priority.
    static func policyPreempts(_ request: FloorRequest, over held: FloorRequest, threshold: UInt8?) -> Bool {
        switch (request.urgency, held.urgency) {
        case (let asked, let holding) where asked > holding: true
        case (let asked, let holding) where asked < holding: false
        case (.normal, _): threshold.map { request.priority >= $0 && request.priority > held.priority } ?? false
        default: request.priority > held.priority
        }
    }
}

extension FloorCallType {
    /// The least urgency of a request in such a call, as the tests read MCPTT.
    var urgencyForTest: FloorUrgency {
        switch self {
        case .emergency: .emergency
        case .imminentPeril: .imminentPeril
        case .basic, .broadcast: .normal
        }
    }
}

/// Which kinds of message, notice and state the random runs produced.
struct Coverage {
    var seen: Set<String> = []

    mutating func record(_ step: NamedFloor.Step, _ server: NamedFloor) {
        seen.insert(server.state.rawValue)
        for delivery in step.messages { seen.insert(Self.kind(of: delivery.message)) }
        for notice in step.notices { seen.insert(Self.kind(of: notice)) }
    }

    var missing: [String] {
        let all =
            NamedFloor.State.allCases.map(\.rawValue) + [
                "granted", "taken", "idle", "queuePosition", "stopTalkingWarning", "deny #1", "deny #4", "deny #5",
                "deny #6", "deny #7", "deny #255", "revoke #2", "revoke #4", "revoke #6", "revoke #255",
                "notice granted",
                "notice queued", "notice denied", "notice inactive", "notice revokeIgnored", "released released",
                "released endOfMedia", "released stopTalking", "released preempted", "released revoked",
                "released left",
            ]
        return all.filter { !seen.contains($0) }
    }

    static func kind(of message: NamedFloor.Message) -> String {
        switch message {
        case .granted: "granted"
        case .taken: "taken"
        case .idle: "idle"
        case .queuePosition: "queuePosition"
        case .stopTalkingWarning: "stopTalkingWarning"
        case .deny(let cause): "deny #\(cause.code)"
        case .revoke(let cause): "revoke #\(cause.code)"
        }
    }

    static func kind(of notice: NamedFloor.Notice) -> String {
        switch notice {
        case .granted: "notice granted"
        case .queued: "notice queued"
        case .denied: "notice denied"
        case .inactive: "notice inactive"
        case .revokeIgnored: "notice revokeIgnored"
        case .released(_, let reason):
            switch reason {
            case .released: "released released"
            case .endOfMedia: "released endOfMedia"
            case .stopTalking: "released stopTalking"
            case .preempted: "released preempted"
            case .revoked: "released revoked"
            case .left: "released left"
            }
        }
    }
}
