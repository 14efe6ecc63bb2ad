import PTTTalkGroups
import Testing

/// One test per row of the transition table in "Floor control and liveness" (FloorControlAndLiveness.md): every
/// transition of `FloorServer` with its TS 24.380 state, message or timer, on a virtual clock.
@Suite("Floor server transitions")
struct FloorServerTransitionTests {
    typealias D = NamedFloor.Delivery

    /// Members a, b, c (a talks first), defaults otherwise.
    static func bed(_ configuration: FloorServerConfiguration = FloorServerConfiguration()) -> FloorBed {
        FloorBed(configuration, members: ["a", "b", "c"])
    }

    static func taken(_ holder: String) -> NamedFloor.Message { .taken(by: holder, urgency: .normal, mayRequest: true) }

    // MARK: Start-stop and G: Floor Idle

    @Test func callInitializationEntersFloorIdle() {
        let floor = FloorBed()
        #expect(floor.state == .floorIdle && floor.state.rawValue == "G: Floor Idle" && floor.holder == nil)
        #expect(floor.deadline(of: .inactivity) == floor.now + ms(30_000), "T4 runs from the start")
        #expect(floor.server.nextDeadline == floor.now + ms(30_000))
        let quiet = FloorBed(FloorServerConfiguration(inactivity: nil))
        #expect(quiet.server.nextDeadline == nil, "no T4: no timer at all")
    }

    @Test func idleFloorRequestGrantsAndTellsEveryoneWhoTalks() {
        let floor = Self.bed()
        let step = floor.request("a", FloorRequest(priority: 7))
        #expect(
            step.messages == [
                .to("a", .granted(duration: .seconds(30), priority: 7, urgency: .normal)),
                .to("b", Self.taken("a")), .to("c", Self.taken("a")),
            ])
        #expect(step.notices == [.granted("a", FloorRequest(priority: 7))])
        #expect(floor.state == .floorTaken && floor.holder == "a")
        #expect(floor.state(of: "a") == .permitted && floor.state(of: "b") == .notPermittedAndFloorTaken)
        #expect(floor.deadline(of: .endOfMedia) == floor.now + ms(4_000), "T1")
        #expect(floor.deadline(of: .stopTalking) == floor.now + ms(30_000), "T2")
        #expect(floor.deadline(of: .stopTalkingWarning) == floor.now + ms(25_000))
        #expect(floor.deadline(of: .floorGranted) == floor.now + ms(1_000), "T20")
        #expect(floor.deadline(of: .inactivity) == nil && floor.deadline(of: .floorIdle) == nil, "T4 and T7 stop")
        #expect(step.nextDeadline == floor.now + ms(1_000))
    }

    @Test func idleFloorDiscardsMedia() {
        let floor = Self.bed()
        #expect(!floor.frame("a") && !floor.frame("b"))
        #expect(floor.server.framesRefused == 2 && floor.state == .floorIdle)
    }

    @Test func floorIdleRepeatsOnT7UpToC7() {
        let floor = Self.bed(FloorServerConfiguration(floorIdleInterval: .seconds(1), floorIdleRepeats: 2))
        _ = floor.request("a")
        let released = floor.release("a")
        #expect(released.messages == [.to("a", .idle), .to("b", .idle), .to("c", .idle)])
        #expect(floor.deadline(of: .floorIdle) == floor.now + ms(1_000))
        #expect(floor.advance(1_000).messages == [.to("a", .idle), .to("b", .idle), .to("c", .idle)])
        #expect(floor.advance(1_000).messages.count == 3, "the second repeat")
        #expect(floor.advance(10_000).messages.isEmpty, "C7 reached")
        #expect(floor.deadline(of: .floorIdle) == nil)
    }

    @Test func inactivityNoticeOnT4() {
        let floor = Self.bed(FloorServerConfiguration(inactivity: .seconds(10)))
        #expect(floor.advance(10_000).notices == [.inactive])
        #expect(floor.advance(10_000).notices == [.inactive], "T4 runs again")
        _ = floor.request("a")
        #expect(floor.deadline(of: .inactivity) == nil, "not while the floor is taken")
        _ = floor.release("a")
        #expect(floor.deadline(of: .inactivity) == floor.now + ms(10_000))
    }

    // MARK: Floor Deny in any state

    @Test func receiveOnlyRequestIsDeniedCause5() {
        let floor = Self.bed()
        _ = floor.join("listener", role: .receiveOnly)
        #expect(floor.request("listener").messages == [.to("listener", .deny(.receiveOnly))])
        _ = floor.request("a")
        let step = floor.request("listener", FloorRequest(urgency: .emergency))
        #expect(
            step.messages == [.to("listener", .deny(.receiveOnly))]
                && step.notices == [.denied("listener", .receiveOnly)])
        #expect(FloorDenyCause.receiveOnly.code == 5)
    }

    @Test func requestWithinRetryAfterIsDeniedCause4() {
        let floor = Self.bed(
            FloorServerConfiguration(
                stopTalking: .seconds(10), stopTalkingWarning: nil, stopTalkingGrace: .seconds(1),
                retryAfter: .seconds(3)))
        _ = floor.request("a")
        _ = floor.talk(["a"], for: 10_000)
        #expect(floor.state == .pendingFloorRevoke)
        #expect(floor.advance(1_000).notices == [.released("a", .stopTalking)], "T3, a silent since T2")
        floor.advance(1_000)
        let denied = floor.request("a")
        #expect(
            denied.messages == [.to("a", .deny(.retryAfter(.seconds(2))))] && FloorDenyCause.retryAfter(.zero).code == 4
        )
        #expect(
            floor.request("b", FloorRequest(queueing: false)).notices == [.granted("b", FloorRequest(queueing: false))])
        _ = floor.release("b")
        #expect(
            floor.request("a", FloorRequest(urgency: .emergency)).notices.first
                == .granted("a", FloorRequest(urgency: .emergency)), "urgent requests are never held back")
        _ = floor.release("a")
        floor.advance(2_000)
        #expect(floor.request("a").notices == [.granted("a", FloorRequest())], "retry-after over")
    }

    @Test func noResourcesDeniesCause6AndEmptiesTheQueue() {
        let floor = Self.bed()
        _ = floor.request("a")
        _ = floor.request("b", FloorRequest(priority: 3))
        let lost = floor.setResources(available: false)
        #expect(lost.messages == [.to("b", .deny(.noResources))] && lost.notices == [.denied("b", .noResources)])
        #expect(floor.queue.isEmpty && floor.frame("a"), "the holder keeps talking")
        #expect(floor.request("c").messages == [.to("c", .deny(.noResources))])
        _ = floor.release("a")
        #expect(floor.request("b").messages == [.to("b", .deny(.noResources))] && FloorDenyCause.noResources.code == 6)
        _ = floor.setResources(available: true)
        #expect(floor.request("b").notices == [.granted("b", FloorRequest())])
    }

    @Test func nonMemberRequestIsDeniedCause255() {
        let floor = Self.bed()
        let step = floor.request("stranger")
        #expect(step.messages == [.to("stranger", .deny(.other))] && FloorDenyCause.other.code == 255)
        #expect(!floor.server.isMember("stranger") && floor.state == .floorIdle)
    }

    // MARK: G: Floor Taken

    @Test func holderMediaIsForwardedAndRestartsT1() {
        let floor = Self.bed()
        _ = floor.request("a")
        floor.advance(300)
        #expect(floor.frame("a"))
        #expect(floor.deadline(of: .endOfMedia) == floor.now + ms(4_000), "T1 counts from the last frame")
        #expect(floor.deadline(of: .floorGranted) == nil, "T20 stops at the first frame")
    }

    @Test func otherMediaIsDiscardedWhileTaken() {
        let floor = Self.bed()
        _ = floor.request("a")
        #expect(!floor.frame("b") && !floor.frame("stranger") && floor.frame("a"))
        #expect(floor.server.framesRefused == 2)
    }

    @Test func holderRequestRepeatsFloorGranted() {
        let floor = Self.bed()
        _ = floor.request("a", FloorRequest(priority: 2))
        _ = floor.talk(["a"], for: 2_000)
        let again = floor.request("a", FloorRequest(priority: 2))
        #expect(again.messages == [.to("a", .granted(duration: .seconds(28), priority: 2, urgency: .normal))])
        #expect(again.notices.isEmpty)
    }

    @Test func takenFloorQueuesByPriorityThenArrival() {
        let floor = Self.bed()
        _ = floor.join("d")
        _ = floor.request("a")
        let b = floor.request("b", FloorRequest(priority: 1))
        #expect(b.messages == [.to("b", .queuePosition(1, priority: 1))] && b.notices == [.queued("b", position: 1)])
        let c = floor.request("c", FloorRequest(priority: 5))
        #expect(c.messages == [.to("c", .queuePosition(1, priority: 5)), .to("b", .queuePosition(2, priority: 1))])
        let d = floor.request("d", FloorRequest(priority: 5))
        #expect(d.messages == [.to("d", .queuePosition(2, priority: 5)), .to("b", .queuePosition(3, priority: 1))])
        #expect(floor.queue == ["c", "d", "b"])
        let again = floor.request("b", FloorRequest(priority: 1))
        #expect(
            again.messages == [.to("b", .queuePosition(3, priority: 1))] && again.notices.isEmpty, "its place again")
    }

    @Test func takenFloorWithoutQueueingDeniesCause1() {
        let floor = Self.bed(FloorServerConfiguration(queueCapacity: 0))
        _ = floor.request("a")
        #expect(floor.request("b").messages == [.to("b", .deny(.anotherMemberHasPermission))])
        let queueing = Self.bed()
        _ = queueing.request("a")
        let step = queueing.request("b", FloorRequest(queueing: false))
        #expect(step.messages == [.to("b", .deny(.anotherMemberHasPermission))] && queueing.queue.isEmpty)
        #expect(FloorDenyCause.anotherMemberHasPermission.code == 1)
    }

    @Test func fullQueueDeniesCause7() {
        let floor = Self.bed(FloorServerConfiguration(queueCapacity: 1))
        _ = floor.request("a")
        _ = floor.request("b")
        let step = floor.request("c", FloorRequest(priority: 200))
        #expect(step.messages == [.to("c", .deny(.queueFull))] && step.notices == [.denied("c", .queueFull)])
        #expect(floor.queue == ["b"] && FloorDenyCause.queueFull.code == 7)
    }

    @Test func preemptiveRequestRevokesAndGrantsInOneStep() {
        let floor = Self.bed(FloorServerConfiguration(preemptivePriority: 200))
        _ = floor.request("a", FloorRequest(priority: 5))
        #expect(floor.frame("a"))
        let emergency = FloorRequest(priority: 5, urgency: .emergency)
        let step = floor.request("b", emergency)
        #expect(
            step.messages == [
                .to("a", .revoke(.preempted)),
                .to("b", .granted(duration: .seconds(30), priority: 5, urgency: .emergency)),
                .to("a", .taken(by: "b", urgency: .emergency, mayRequest: true)),
                .to("c", .taken(by: "b", urgency: .emergency, mayRequest: true)),
            ])
        #expect(step.notices == [.released("a", .preempted(by: "b")), .granted("b", emergency)])
        #expect(!floor.frame("a") && floor.frame("b"), "the old holder's frames are refused from the request on")
        #expect(
            floor.state(of: "a") == .pendingFloorRevoke
                && floor.deadline(of: .floorRevoke("a")) == floor.now + ms(1_000))
        #expect(FloorRevokeCause.preempted.code == 4)
        // Imminent peril over a normal holder, and a priority at the group's pre-emptive priority.
        _ = floor.release("b")
        _ = floor.request("a")
        #expect(
            floor.request("b", FloorRequest(urgency: .imminentPeril)).notices.last
                == .granted("b", FloorRequest(urgency: .imminentPeril)))
        _ = floor.release("b")
        _ = floor.request("a", FloorRequest(priority: 100))
        #expect(
            floor.request("c", FloorRequest(priority: 200)).notices == [
                .released("a", .preempted(by: "c")), .granted("c", FloorRequest(priority: 200)),
            ])
    }

    @Test func requestBelowThePolicyDoesNotPreempt() {
        let noThreshold = Self.bed()
        _ = noThreshold.request("a", FloorRequest(priority: 0))
        #expect(
            noThreshold.request("b", FloorRequest(priority: 255)).notices == [.queued("b", position: 1)],
            "priority alone: no policy, no pre-emption")
        let policy = Self.bed(FloorServerConfiguration(preemptivePriority: 200))
        _ = policy.join("d")
        _ = policy.request("a", FloorRequest(priority: 100))
        #expect(
            policy.request("b", FloorRequest(priority: 150)).notices == [.queued("b", position: 1)],
            "below the threshold")
        let urgent = Self.bed(FloorServerConfiguration(preemptivePriority: 200))
        _ = urgent.join("d")
        _ = urgent.request("a", FloorRequest(priority: 220, urgency: .emergency))
        #expect(urgent.request("b", FloorRequest(priority: 255)).notices == [.queued("b", position: 1)], "less urgent")
        #expect(
            urgent.request("c", FloorRequest(priority: 255, urgency: .imminentPeril)).notices.first
                == .queued("c", position: 1), "imminent peril under an emergency")
        #expect(
            urgent.request("d", FloorRequest(priority: 220, urgency: .emergency)).notices.first
                == .queued("d", position: 1), "equal priority")
        #expect(urgent.holder == "a")
    }

    @Test func queuePositionRequestIsAnswered() {
        let floor = Self.bed()
        #expect(floor.queuePositionRequest("b").messages == [.to("b", .idle)])
        _ = floor.request("a")
        _ = floor.request("b", FloorRequest(priority: 9))
        #expect(floor.queuePositionRequest("b").messages == [.to("b", .queuePosition(1, priority: 9))])
        #expect(floor.queuePositionRequest("c").messages == [.to("c", Self.taken("a"))])
    }

    @Test func holderReleaseIdlesTheFloor() {
        let floor = Self.bed()
        _ = floor.request("a")
        let step = floor.release("a")
        #expect(step.messages == [.to("a", .idle), .to("b", .idle), .to("c", .idle)])
        #expect(step.notices == [.released("a", .released)])
        #expect(floor.state == .floorIdle && floor.state(of: "a") == .notPermittedAndFloorIdle)
        #expect(floor.deadline(of: .inactivity) == floor.now + ms(30_000) && floor.deadline(of: .endOfMedia) == nil)
    }

    @Test func holderReleaseGrantsTheFirstWaiting() {
        let floor = Self.bed()
        _ = floor.request("a")
        _ = floor.request("b", FloorRequest(priority: 4))
        _ = floor.request("c", FloorRequest(priority: 1))
        let step = floor.release("a")
        #expect(
            step.messages == [
                .to("b", .granted(duration: .seconds(30), priority: 4, urgency: .normal)),
                .to("a", Self.taken("b")), .to("c", Self.taken("b")), .to("c", .queuePosition(1, priority: 1)),
            ])
        #expect(step.notices == [.released("a", .released), .granted("b", FloorRequest(priority: 4))])
        #expect(floor.holder == "b" && floor.queue == ["c"])
    }

    @Test func queuedReleaseLeavesTheQueueAndMovesOthersUp() {
        let floor = Self.bed()
        _ = floor.join("d")
        _ = floor.request("a")
        for member in ["b", "c", "d"] { _ = floor.request(member) }
        let step = floor.release("c")
        #expect(step.messages == [.to("d", .queuePosition(2, priority: 0))] && step.notices.isEmpty)
        #expect(floor.queue == ["b", "d"] && floor.holder == "a")
    }

    @Test func endOfMediaT1ReleasesTheFloor() {
        // The case: a talker pausing 1.5 s (a breath, silence suppression) keeps the floor under T1's 4 s.
        let floor = Self.bed()
        _ = floor.request("a")
        #expect(floor.talk(["a"], for: 1_000).forwarded["a"] == 50)
        let pause = floor.advance(1_500)
        #expect(pause.notices.isEmpty && floor.holder == "a")
        #expect(floor.talk(["a"], for: 500).forwarded["a"] == 25, "the 25 frames after the pause are forwarded")
        let last = floor.now
        #expect(floor.advance(3_999).notices.isEmpty)
        let expired = floor.advance(1)
        #expect(expired.notices == [.released("a", .endOfMedia)] && floor.now == last + ms(4_000))
        #expect(expired.messages == [.to("a", .idle), .to("b", .idle), .to("c", .idle)])
    }

    @Test func floorGrantedRepeatsOnT20UntilFirstMedia() {
        let floor = Self.bed()
        _ = floor.request("a")
        let repeats = floor.advance(3_500)
        #expect(
            repeats.messages
                == [29, 28, 27].map { .to("a", .granted(duration: .seconds($0), priority: 0, urgency: .normal)) },
            "C20: three times, a second apart")
        #expect(floor.deadline(of: .floorGranted) == nil)
        _ = floor.release("a")
        _ = floor.request("b")
        floor.advance(500)
        #expect(floor.frame("b"))
        #expect(floor.talk(["b"], for: 3_000).step.messages.isEmpty, "no repeat once its audio arrived")
    }

    @Test func stopTalkingWarningBeforeT2() {
        let floor = Self.bed(FloorServerConfiguration(stopTalking: .seconds(10), stopTalkingWarning: .seconds(3)))
        _ = floor.request("a")
        let talked = floor.talk(["a"], for: 7_000)
        #expect(talked.step.messages == [.to("a", .stopTalkingWarning(remaining: .seconds(3)))])
        #expect(floor.state == .floorTaken)
    }

    @Test func stopTalkingT2RevokesWithGrace() {
        let floor = Self.bed(FloorServerConfiguration(stopTalking: .seconds(10), stopTalkingWarning: nil))
        let granted = floor.now
        _ = floor.request("a")
        let talked = floor.talk(["a"], for: 10_000)
        #expect(talked.step.messages == [.to("a", .revoke(.mediaBurstTooLong))] && talked.step.notices.isEmpty)
        #expect(floor.state == .pendingFloorRevoke && floor.state.rawValue == "G: pending Floor Revoke")
        #expect(floor.state(of: "a") == .pendingFloorRevoke && floor.holder == "a")
        #expect(floor.deadline(of: .stopTalkingGrace) == granted + ms(11_000), "T3 runs from T2's expiry")
        #expect(FloorRevokeCause.mediaBurstTooLong.code == 2)
    }

    @Test func applicationRevokeCutsTheHolderOff() {
        let floor = Self.bed()
        _ = floor.request("a")
        _ = floor.request("b")
        let step = floor.revoke(.other)
        #expect(
            step.messages == [
                .to("a", .revoke(.other)), .to("b", .granted(duration: .seconds(30), priority: 0, urgency: .normal)),
                .to("a", Self.taken("b")), .to("c", Self.taken("b")),
            ])
        #expect(step.notices == [.released("a", .revoked(.other)), .granted("b", FloorRequest())])
        #expect(!floor.frame("a") && floor.frame("b") && FloorRevokeCause.other.code == 255)
        #expect(floor.revoke().notices.first == .released("b", .revoked(.other)) && floor.revoke().messages.isEmpty)
    }

    @Test func holderLeavingMovesTheFloorOn() {
        let floor = Self.bed()
        _ = floor.request("a")
        _ = floor.request("b")
        let step = floor.leave("a")
        #expect(
            step.messages == [
                .to("b", .granted(duration: .seconds(30), priority: 0, urgency: .normal)), .to("c", Self.taken("b")),
            ])
        #expect(step.notices == [.released("a", .left), .granted("b", FloorRequest())])
        #expect(!floor.server.isMember("a") && floor.state(of: "a") == nil)
        #expect(floor.leave("b").messages == [.to("c", .idle)], "the last talker leaves: Floor Idle to the rest")
    }

    // MARK: G: pending Floor Revoke

    /// a talks 10 s into T2's revoke; b waits.
    static func revokedForTalkingTooLong(grace: Duration = .seconds(1)) -> FloorBed {
        let floor = bed(
            FloorServerConfiguration(stopTalking: .seconds(10), stopTalkingWarning: nil, stopTalkingGrace: grace))
        _ = floor.request("a")
        _ = floor.request("b")
        _ = floor.talk(["a"], for: 10_000)
        return floor
    }

    @Test func graceForwardsTheRevokedHoldersMedia() {
        let floor = Self.revokedForTalkingTooLong()
        floor.advance(100)
        #expect(floor.frame("a") && floor.deadline(of: .endOfMedia) == floor.now + ms(4_000))
        #expect(!floor.frame("b"))
    }

    @Test func releaseDuringGraceMovesTheFloorOn() {
        let floor = Self.revokedForTalkingTooLong()
        let step = floor.release("a")
        #expect(step.notices == [.released("a", .stopTalking), .granted("b", FloorRequest())])
        #expect(floor.state(of: "a") == .notPermittedAndFloorTaken, "it released: no revoke pending")
        #expect(floor.release("b").notices == [.released("b", .released)])
        #expect(floor.request("a").messages == [.to("a", .deny(.retryAfter(.seconds(3))))])
    }

    @Test func graceEndsOnT3() {
        let floor = Self.revokedForTalkingTooLong()
        let talked = floor.talk(["a"], for: 1_500)
        #expect(talked.step.notices == [.released("a", .stopTalking), .granted("b", FloorRequest())])
        #expect(talked.forwarded["a"] == 49, "forwarded until T3, refused after")
        #expect(floor.state(of: "a") == .pendingFloorRevoke && floor.holder == "b")
        #expect(floor.deadline(of: .floorRevoke("a")) != nil, "T8 runs while its audio is refused")
    }

    @Test func silenceDuringGraceEndsIt() {
        let floor = Self.revokedForTalkingTooLong(grace: .seconds(10))
        let silent = floor.advance(4_000)
        #expect(silent.notices == [.released("a", .stopTalking), .granted("b", FloorRequest())], "T1 during the grace")
        #expect(floor.state(of: "a") == .notPermittedAndFloorTaken)
    }

    @Test func preemptionDuringGrace() {
        let floor = Self.revokedForTalkingTooLong()
        let step = floor.request("c", FloorRequest(urgency: .emergency))
        #expect(step.messages.first == .to("a", .revoke(.preempted)))
        #expect(
            step.notices == [.released("a", .preempted(by: "c")), .granted("c", FloorRequest(urgency: .emergency))])
        #expect(floor.state == .floorTaken && !floor.frame("a") && floor.queue == ["b"])
    }

    // MARK: U: pending Floor Revoke

    @Test func revokedMembersMediaIsDiscarded() {
        let floor = Self.bed()
        _ = floor.request("a")
        _ = floor.revoke()
        #expect(floor.state(of: "a") == .pendingFloorRevoke && !floor.frame("a"))
        #expect(floor.server.framesRefused == 1)
    }

    @Test func floorRevokeRepeatsOnT8WhileTheMemberSends() {
        let floor = Self.bed()
        _ = floor.request("a")
        _ = floor.request("b", FloorRequest(urgency: .emergency))
        let talked = floor.talk(["a", "b"], for: 4_010)
        #expect(talked.step.messages == Array(repeating: .to("a", .revoke(.preempted)), count: 3), "C8: three repeats")
        #expect(talked.step.notices == [.revokeIgnored("a")] && talked.forwarded["a"] == nil)
        #expect(floor.state(of: "a") == .notPermittedAndFloorTaken && floor.deadline(of: .floorRevoke("a")) == nil)
    }

    @Test func revokedMemberThatStopsIsNotPermittedAgain() {
        let floor = Self.bed()
        _ = floor.request("a")
        _ = floor.request("b", FloorRequest(urgency: .emergency))
        floor.advance(10)
        #expect(!floor.frame("a"), "one frame still in flight")
        #expect(floor.frame("b"))
        #expect(floor.advance(1_000).messages.isEmpty, "T8: silent since, no repeat")
        #expect(floor.state(of: "a") == .notPermittedAndFloorTaken)
        _ = floor.request("c", FloorRequest(priority: 1, urgency: .emergency))
        #expect(floor.state(of: "b") == .pendingFloorRevoke)
        #expect(floor.release("b").messages.isEmpty && floor.state(of: "b") == .notPermittedAndFloorTaken)
        #expect(floor.deadline(of: .floorRevoke("b")) == nil, "Floor Release ends it too")
    }

    // MARK: Any state

    @Test func joiningMemberIsToldTheFloorState() {
        let floor = Self.bed()
        #expect(floor.join("late").messages == [.to("late", .idle)])
        _ = floor.request("a")
        _ = floor.request("b", FloorRequest(priority: 3))
        #expect(floor.join("later").messages == [.to("later", Self.taken("a"))], "late entry: who talks")
        _ = floor.talk(["a"], for: 5_000)
        #expect(floor.join("a").messages == [.to("a", .granted(duration: .seconds(25), priority: 0, urgency: .normal))])
        #expect(floor.join("b").messages == [.to("b", Self.taken("a")), .to("b", .queuePosition(1, priority: 3))])
        #expect(floor.server.members == ["a", "b", "c", "late", "later"], "joining again is no second membership")
    }

    @Test func callTypeRaisesRequests() {
        let floor = Self.bed()
        floor.setCallType(.emergency)
        let step = floor.request("a", FloorRequest(priority: 3))
        #expect(step.notices == [.granted("a", FloorRequest(priority: 3, urgency: .emergency))])
        #expect(step.messages.last == .to("c", .taken(by: "a", urgency: .emergency, mayRequest: true)))
        #expect(
            floor.request("b", FloorRequest(priority: 3, urgency: .imminentPeril)).notices == [
                .queued("b", position: 1)
            ])
        #expect(
            floor.request("c", FloorRequest(priority: 4)).notices.first == .released("a", .preempted(by: "c")),
            "emergency against emergency: the higher priority")
        let peril = Self.bed()
        peril.setCallType(.imminentPeril)
        _ = peril.request("a")
        #expect(
            peril.request("b", FloorRequest(urgency: .emergency)).notices.first == .released("a", .preempted(by: "b")))
    }

    @Test func broadcastCallTakesNoQueue() {
        let floor = FloorBed(FloorServerConfiguration(callType: .broadcast), members: ["dispatch", "other"])
        _ = floor.join("listener", role: .receiveOnly)
        let step = floor.request("dispatch")
        #expect(
            step.messages.dropFirst().allSatisfy {
                $0.message == .taken(by: "dispatch", urgency: .normal, mayRequest: false)
            })
        #expect(
            floor.request("other").messages == [.to("other", .deny(.anotherMemberHasPermission))] && floor.queue.isEmpty
        )
        #expect(floor.request("listener").messages == [.to("listener", .deny(.receiveOnly))])
    }
}
