import Testing

@testable import NetworkEmulation

/// The emulated path's timeline (sans-IO): each packet of a client port paired with its release, in order, so the
/// wake-to-voice bench can split a first audio into the phone's, the path's and the relay's shares.
@Suite("Path timeline (in memory)")
struct PathTimelineTests {
    static func packet(_ sourcePort: UInt16, _ destinationPort: UInt16) -> [UInt8] {
        ImpairmentTests.udp(
            from: ImpairmentTests.client4, sourcePort, to: ImpairmentTests.server4, destinationPort, payload: [1, 2])
    }

    @Test func packetsOfAPortPairWithTheirReleasesInOrder() {
        var timeline = PathTimeline()
        timeline.record(Self.packet(5000, 443), direction: .clientToServer, entered: true, now: 50)  // before `since`
        timeline.record(Self.packet(5000, 443), direction: .clientToServer, entered: false, now: 75)
        timeline.record(Self.packet(5001, 443), direction: .clientToServer, entered: true, now: 100)
        timeline.record(Self.packet(5001, 443), direction: .clientToServer, entered: true, now: 110)
        timeline.record(Self.packet(6000, 443), direction: .clientToServer, entered: true, now: 115)  // another phone
        timeline.record(Self.packet(5001, 443), direction: .clientToServer, entered: false, now: 125)
        timeline.record(Self.packet(443, 5001), direction: .serverToClient, entered: true, now: 130)
        timeline.record([0x45, 0], direction: .clientToServer, entered: true, now: 131)  // not a UDP packet: skipped
        #expect(timeline.events.count == 7)
        let split = timeline.byClientPort()
        #expect(Set(split.keys) == [5000, 5001, 6000])
        let out = split[5001]!.packets(.clientToServer, clientPort: 5001, since: 90)
        #expect(out.map(\.entered) == [100, 110])
        #expect(out.map(\.left) == [125, nil], "the second is still on the path")
        let back = timeline.packets(.serverToClient, clientPort: 5001, since: 90)
        #expect(back.map(\.entered) == [130] && back.map(\.left) == [nil])
    }
}
