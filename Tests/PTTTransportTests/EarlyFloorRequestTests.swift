import PTTTransport
import Testing

@testable import PTTTalkGroups

/// A woken talker's floor request in the 0-RTT first flight: which early requests the relay acts on before the
/// handshake, and what the phone puts in each attempt's first flight (sans-IO).
@Suite("Floor request in the 0-RTT first flight (sans-IO)")
struct EarlyFloorRequestTests {
    static let floor = TalkGroupMessage.requestFloor(group: "g", priority: 3, emergency: true)
    static let join = TalkGroupMessage.join(
        .init(group: "g", user: try! MemberIdentity("u"), credential: [], wakeAddress: nil))

    @Test func aFloorRequestInAcceptedEarlyDataIsActedOnAtOnce() {
        #expect(EarlyRequests.actsAtOnce(Self.floor, early: true, earlyDataAccepted: true))
    }

    @Test func aFloorRequestInEarlyDataNotAcceptedWaitsForTheHandshake() {
        // Early data the transport did not accept (no successful anti-replay claim) is never acted on early.
        #expect(!EarlyRequests.actsAtOnce(Self.floor, early: true, earlyDataAccepted: false))
    }

    @Test func releaseAndLeaveInEarlyDataWaitEvenWhenAccepted() {
        for request in [TalkGroupMessage.releaseFloor(group: "g"), .leave(group: "g")] {
            #expect(!EarlyRequests.actsAtOnce(request, early: true, earlyDataAccepted: true), "\(request.kind)")
        }
    }

    @Test func replaySafeRequestsAndOneRTTRequestsAreActedOnAtOnce() {
        let catchUp = TalkGroupMessage.catchUp(group: "g", burst: 1, from: 0)
        for request in [Self.join, catchUp] {
            #expect(EarlyRequests.actsAtOnce(request, early: true, earlyDataAccepted: false))
        }
        for request in [Self.floor, .releaseFloor(group: "g"), .leave(group: "g")] {
            #expect(EarlyRequests.actsAtOnce(request, early: false, earlyDataAccepted: false))
        }
    }

    @Test func aPendingFloorRequestRidesAfterTheJoinAndCatchUpUntilAConnectionIsReady() throws {
        var state = TalkGroupPhone.PhoneState()
        let rejoin = [EarlyMessage(Self.join.encoded(), replaySafe: true)]
        let catchUp = TalkGroupMessage.catchUp(group: "g", burst: 9, from: 0)
        state.pendingCatchUp = catchUp
        state.pendingFloorRequest = Self.floor
        let flight = state.firstFlight(rejoin)
        #expect(flight.map(\.bytes) == [Self.join.encoded(), catchUp.encoded(), Self.floor.encoded()])
        #expect(flight.allSatisfy { $0.replaySafe }, "every message may travel in 0-RTT")
        // A failed attempt: the next one carries the same.
        #expect(state.firstFlight(rejoin).map(\.bytes) == flight.map(\.bytes))
        // Ready: the first flight carried it, nothing to send again, nothing pending any more.
        #expect(state.connected(ObjectIdentifier(Marker())) == nil)
        #expect(state.pendingFloorRequest == nil && state.pendingCatchUp == nil)
        #expect(state.firstFlight(rejoin).map(\.bytes) == [Self.join.encoded()])
    }

    @Test func aFloorRequestTooLateForTheAttemptUnderWayIsSentOnItsConnection() {
        var state = TalkGroupPhone.PhoneState()
        _ = state.firstFlight([])  // the attempt started before the key press
        state.pendingFloorRequest = Self.floor
        #expect(state.connected(ObjectIdentifier(Marker())) == Self.floor)
        #expect(state.pendingFloorRequest == nil)
    }

    private final class Marker {}
}
