import PTTTalkGroups
import TestSupport
import Testing
import TransportCore
import TransportIO

@testable import PTTTransport

/// `EventBroadcast` (behind `RelayChannel.floorEvents`): every reader gets every event, in order; a reader that is
/// cancelled ends only its own subscription, and one that begins later sees what is published from then on.
@Suite("Event broadcast", .integration)
struct EventBroadcastTests {
    @Test func twoReadersEachGetEveryOneOfTenThousandEvents() async throws {
        let broadcast = EventBroadcast<Int>(capacity: 65_536)
        let subscriptions = [broadcast.subscribe(), broadcast.subscribe()]
        let readers = subscriptions.map { subscription in
            Task { () -> [Int] in
                var seen: [Int] = []
                while let event = await subscription.next() { seen.append(event) }
                return seen
            }
        }
        // Published from another task while the readers read.
        await Task.detached { for event in 0..<10_000 { broadcast.publish(event) } }.value
        broadcast.finish()
        for reader in readers { #expect(await reader.value == Array(0..<10_000), "0 lost, none twice, in order") }
        #expect(broadcast.dropped == 0)
    }

    @Test func aCancelledReaderEndsAloneAndALaterReaderSeesLaterEvents() async throws {
        let broadcast = EventBroadcast<Int>(capacity: 16)
        let stays = broadcast.subscribe()
        let leaves = broadcast.subscribe()
        let cancelled = Task { await leaves.next() }
        cancelled.cancel()
        #expect(await cancelled.value == nil, "a cancelled wait ends that reader")
        broadcast.publish(1)
        let later = broadcast.subscribe()
        broadcast.publish(2)
        broadcast.publish(3)
        #expect(await stays.next() == 1)
        #expect(await later.next() == 2, "a reader that began later sees the events from then on")
        #expect(await later.next() == 3)
        #expect(await stays.next() == 2)
        broadcast.finish()
        #expect(await stays.next() == 3)
        #expect(await stays.next() == nil)
    }

    /// On a channel: two readers of `floorEvents` both see a grant; a reader whose task is cancelled stops, and a
    /// new reader sees the events after it began.
    @Test func floorEventsReachEveryReaderAndReadersComeAndGo() async throws {
        let bed = try await ChannelTestBed()
        try await withTimeout {
            let channel = RelayChannel(
                server: bed.server, floor: FloorControl(policy: .queue(limit: 2), idleRelease: .seconds(30)))
            let first = channel.floorEvents
            let second = channel.floorEvents
            let a = try await bed.connect(.quicOnly)
            try await channel.join(a.relaySide)
            let id = a.relaySide.id
            #expect(try await channel.requestFloor(for: a.relaySide) == .granted)
            var firstIterator = first.makeAsyncIterator()
            #expect(await firstIterator.next() == .granted(id))
            let cancelledReader = Task {
                var iterator = second.makeAsyncIterator()
                var seen: [FloorEvent] = []
                while let event = await iterator.next() { seen.append(event) }
                return seen
            }
            cancelledReader.cancel()
            #expect([[], [.granted(id)]].contains(await cancelledReader.value), "cancelled: it ends, alone")
            let third = channel.floorEvents
            #expect(channel.releaseFloor(for: a.relaySide))
            var thirdIterator = third.makeAsyncIterator()
            #expect(await thirdIterator.next() == .released(id, reason: .released), "a new reader sees later events")
            #expect(await firstIterator.next() == .released(id, reason: .released))
            await a.client.close()
        }
        await bed.server.shutdown()
    }
}
