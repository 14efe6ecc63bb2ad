import PTTTalkGroups
import PTTTransport
import TestSupport
import Testing
import TransportCore
import TransportIO

/// A `RelayChannel` runs TS 24.380's floor control server (`FloorServer`) on live connections, over QUIC and TCP:
/// the queue orders by urgency and priority and tells every waiting member its new place; an emergency request
/// revokes the holder and is granted in the same step (the holder's frames are refused from then on); reject causes
/// #1 and #7; the talk time ends with a warning, a revoke and a release; events name members by identity.
@Suite("Floor control, MCPTT on a channel", .integration)
struct FloorChannelMCPTTTests {
    @Test(arguments: [FallbackPolicy.quicOnly, .tcpOnly])
    func priorityOrdersTheLineAndAnEmergencyPreemptsTheHolder(policy: FallbackPolicy) async throws {
        let bed = try await ChannelTestBed()
        try await withTimeout {
            // T1 long: a loaded machine's stall between the grant and the first frame must not free the floor here.
            let configuration = FloorServerConfiguration(queueCapacity: 2, endOfMedia: .seconds(30), inactivity: nil)
            let channel = RelayChannel(server: bed.server, floor: FloorControl(server: configuration))
            let log = FloorEventLog(channel)
            let updates = UpdateLog(channel)
            let peers = [
                try await bed.connect(policy), try await bed.connect(policy), try await bed.connect(policy),
                try await bed.connect(policy), try await bed.connect(policy),
            ]
            let names = ["alice", "bob", "carol", "dave", "dispatch"]
            for (peer, name) in zip(peers, names) {
                try await channel.join(peer.relaySide, as: try MemberIdentity(name))
            }
            let (a, b, c, d, e) = (peers[0], peers[1], peers[2], peers[3], peers[4])
            let ids = peers.map(\.relaySide.id)

            #expect(try await channel.requestFloor(for: a.relaySide, FloorRequest(priority: 10)) == .granted)
            #expect(try await channel.requestFloor(for: b.relaySide, FloorRequest(priority: 5)) == .queued(position: 1))
            #expect(
                try await channel.requestFloor(for: c.relaySide, FloorRequest(priority: 50)) == .queued(position: 1),
                "a higher priority goes ahead in the line")
            #expect(
                try await channel.requestFloor(for: d.relaySide) == .denied(holder: ids[0], cause: .queueFull),
                "#7: the line of 2 is full")
            #expect(
                try await channel.requestFloor(for: d.relaySide, FloorRequest(queueing: false))
                    == .denied(holder: ids[0], cause: .anotherMemberHasPermission), "#1: it may not wait")

            #expect(
                try await channel.requestFloor(for: e.relaySide, FloorRequest(urgency: .emergency)) == .granted,
                "an emergency is granted at once")
            let dispatch = try MemberIdentity("dispatch")
            #expect(channel.talker == ids[4] && channel.talkerIdentity == dispatch)
            _ = try await a.send(5, tag: 1)  // pre-empted: refused
            let fromE = try await e.send(5, tag: 5)
            try await settle { b.count >= 5 && channel.framesRefused >= 5 }
            #expect(b.take() == fromE, "listeners hear the emergency talker only")

            let expected: [FloorEvent] = [
                .granted(ids[0]), .queued(ids[1], position: 1), .queued(ids[2], position: 1),
                .queued(ids[1], position: 2), .denied(ids[3], holder: ids[0], cause: .queueFull),
                .denied(ids[3], holder: ids[0], cause: .anotherMemberHasPermission),
                .revoked(ids[0], cause: .preempted), .released(ids[0], reason: .preempted), .granted(ids[4]),
            ]
            #expect(try await log.instant(of: .granted(ids[4])) != nil)
            #expect(log.all == expected)
            let identities = try await updates.wait(count: expected.count).map(\.member.user)
            #expect(
                identities == ["alice", "bob", "carol", "bob", "dave", "dave", "alice", "alice", "dispatch"],
                "every update names its member by identity")
            for peer in peers { await peer.client.close() }
        }
        await bed.server.shutdown()
    }

    @Test(arguments: [FallbackPolicy.quicOnly, .tcpOnly])
    func theTalkTimeEndsWithAWarningARevokeAndARelease(policy: FallbackPolicy) async throws {
        let bed = try await ChannelTestBed()
        try await withTimeout {
            let configuration = FloorServerConfiguration(
                endOfMedia: .seconds(30), stopTalking: .milliseconds(1500), stopTalkingWarning: .milliseconds(1000),
                stopTalkingGrace: .milliseconds(200), inactivity: nil)
            let channel = RelayChannel(server: bed.server, floor: FloorControl(server: configuration))
            let log = FloorEventLog(channel)
            let a = try await bed.connect(policy)
            try await channel.join(a.relaySide, as: try MemberIdentity("alice"))
            let id = a.relaySide.id
            #expect(try await channel.requestFloor(for: a.relaySide) == .granted)
            let released = try #require(await log.release(of: id))
            #expect(released.reason == .talkTimeExceeded)
            let events = log.all
            #expect(events.first == .granted(id))
            #expect(events.contains(.revoked(id, cause: .mediaBurstTooLong)))
            let warnings = events.compactMap { event -> Duration? in
                if case .talkTimeWarning(id, let remaining) = event { return remaining }
                return nil
            }
            #expect(warnings.count == 1 && warnings[0] <= .milliseconds(1000), "warned before the revoke")
            #expect(
                events.firstIndex { if case .talkTimeWarning = $0 { true } else { false } }!
                    < events.firstIndex(of: .revoked(id, cause: .mediaBurstTooLong))!)
            #expect("\(released.reason)" == "the talk time ran out", "reasons print in words")
            await a.client.close()
        }
        await bed.server.shutdown()
    }
}

/// A channel's `floorUpdates` as they arrive.
final class UpdateLog: Sendable {
    private let updates = Locked<[FloorUpdate]>([])
    private let reader: Task<Void, Never>

    init(_ channel: RelayChannel) {
        let stream = channel.floorUpdates  // subscribed now: nothing published from here on is missed
        reader = Task { [updates] in for await update in stream { updates.withLock { $0.append(update) } } }
    }

    deinit { reader.cancel() }

    /// The first `count` updates, waiting for them up to 10 s.
    func wait(count: Int) async throws -> [FloorUpdate] {
        let deadline = ContinuousClock.now + .seconds(10)
        while updates.withLock({ $0.count }) < count, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))
        }
        return updates.withLock { Array($0.prefix(count)) }
    }
}

/// A talker whose connection closes: its release is published, with its identity, before the relay side's
/// `closed()` returns, over QUIC and TCP.
@Suite("Floor control, events before closed()", .integration)
struct FloorEventsBeforeCloseTests {
    @Test(arguments: [FallbackPolicy.quicOnly, .tcpOnly])
    func theReleaseIsPublishedBeforeClosedReturns(policy: FallbackPolicy) async throws {
        let bed = try await ChannelTestBed()
        try await withTimeout {
            let channel = RelayChannel(
                server: bed.server, floor: FloorControl(policy: .queue(limit: 2), idleRelease: .seconds(30)))
            let updates = channel.floorUpdates
            for round in 0..<5 {
                let talker = try await bed.connect(policy)
                let user = try MemberIdentity("talker-\(round)")
                try await channel.join(talker.relaySide, as: user)
                #expect(try await channel.requestFloor(for: talker.relaySide) == .granted)
                await talker.client.close()
                _ = try await talker.relaySide.closed()
                // Published already: the subscription holds it, no wait needed beyond the mailbox.
                var iterator = updates.makeAsyncIterator()
                #expect(await iterator.next()?.event == .granted(talker.relaySide.id))
                let released = await iterator.next()
                #expect(released?.event == .released(talker.relaySide.id, reason: .closed))
                #expect(released?.member == user, "the release names the member")
                #expect(channel.talker == nil, "the floor was free when closed() returned")
            }
        }
        await bed.server.shutdown()
    }
}
