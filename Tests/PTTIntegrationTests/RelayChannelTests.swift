import PTTTalkGroups
import PTTTransport
import TestSupport
import Testing
import TransportIO

/// `RelayChannel` end to end over loopback: talk groups on one server, a member moving between them, leaving,
/// closing, racing joins, and the channel's own lifetime.
@Suite("Relay channels", .integration)
struct RelayChannelTests {
    @Test(arguments: [FallbackPolicy.quicOnly, .tcpOnly])
    func aMovedMembersFramesGoOnlyToItsCurrentChannelExactlyOnce(policy: FallbackPolicy) async throws {
        let bed = try await ChannelTestBed()
        try await withTimeout {
            let alphaStatistics = FanoutStatistics()
            let alpha = RelayChannel(server: bed.server, statistics: alphaStatistics)
            let beta = RelayChannel(server: bed.server)
            let a1 = try await bed.connect(policy)
            let a2 = try await bed.connect(policy)
            let b1 = try await bed.connect(policy)
            let mover = try await bed.connect(policy)
            #expect([a1, a2, b1, mover].allSatisfy { $0.client.path == (policy == .tcpOnly ? .tcp : .quic) })
            for peer in [a1, a2, mover] { try await alpha.join(peer.relaySide) }
            try await beta.join(b1.relaySide)
            #expect(await alpha.members.map(\.id) == [a1, a2, mover].map(\.relaySide.id))
            #expect(await beta.members.map(\.id) == [b1.relaySide.id])

            let sentInAlpha = try await mover.send(10, tag: 1)
            try await settle { a1.count >= 10 && a2.count >= 10 }
            #expect(a1.take() == sentInAlpha, "every frame, once, in order")
            #expect(a2.take() == sentInAlpha)
            #expect(b1.take() == [], "nothing crosses into another channel")
            #expect(mover.take() == [], "never sent back to the talker")

            try await beta.join(mover.relaySide)  // moves it: out of alpha, into beta
            #expect(await alpha.members.map(\.id) == [a1, a2].map(\.relaySide.id))
            #expect(await beta.members.map(\.id) == [b1, mover].map(\.relaySide.id))
            let sentInBeta = try await mover.send(10, tag: 2)
            let fromA1 = try await a1.send(10, tag: 3)
            let fromB1 = try await b1.send(10, tag: 4)
            try await settle { b1.count >= 10 && a2.count >= 10 && mover.count >= 10 }
            #expect(b1.take() == sentInBeta, "the moved member's frames reach its new channel, once")
            #expect(a2.take() == fromA1, "its old channel gets none of them")
            #expect(mover.take() == fromB1, "it hears its new channel only")
            #expect(a1.take() == [])

            let snapshot = alphaStatistics.take()
            #expect(snapshot.framesReceived == 20, "alpha forwarded the mover's first 10 frames and a1's 10")
            #expect(snapshot.copiesQueued == 30, "10 frames to two listeners, then 10 to one")
            for peer in [a1, a2, b1, mover] { await peer.client.close() }
        }
        await bed.server.shutdown()
    }

    @Test func leaveStopsDeliveryBothWaysAndHandsFramesBackToTheConnection() async throws {
        let bed = try await ChannelTestBed()
        try await withTimeout {
            let channel = RelayChannel(server: bed.server)
            let a = try await bed.connect(.quicOnly)
            let b = try await bed.connect(.quicOnly)
            let c = try await bed.connect(.tcpOnly)
            for peer in [a, b, c] { try await channel.join(peer.relaySide) }
            await channel.leave(b.relaySide)
            await channel.leave(b.relaySide)  // not a member any more: nothing happens
            #expect(await channel.members.map(\.id) == [a, c].map(\.relaySide.id))

            let fromA = try await a.send(5, tag: 1)
            let fromB = try await b.send(5, tag: 2)
            try await settle { c.count >= 5 }
            #expect(c.take() == fromA)
            #expect(b.take() == [], "a member that left hears nothing")
            #expect(a.take() == [] && c.take() == [], "and is heard by no one")
            #expect(
                await Self.collect(5, from: b.relaySide) == fromB,
                "its frames go to its own datagrams sequence again")
            for peer in [a, b, c] { await peer.client.close() }
        }
        await bed.server.shutdown()
    }

    @Test func aClosedMemberLeavesAndCannotJoinAgain() async throws {
        let bed = try await ChannelTestBed()
        try await withTimeout {
            let channel = RelayChannel(server: bed.server)
            let a = try await bed.connect(.quicOnly)
            let b = try await bed.connect(.tcpOnly)
            let closing = try await bed.connect(.tcpOnly)
            for peer in [a, b, closing] { try await channel.join(peer.relaySide) }
            await closing.client.close()
            _ = try await closing.relaySide.closed()
            var members = await channel.members
            for _ in 0..<4000 where members.count == 3 {
                try await Task.sleep(for: .milliseconds(5))
                members = await channel.members
            }
            #expect(members.map(\.id) == [a, b].map(\.relaySide.id))
            try await channel.join(closing.relaySide)
            #expect(await channel.members.map(\.id) == [a, b].map(\.relaySide.id), "a closed connection joins nothing")

            let fromA = try await a.send(5, tag: 1)
            try await settle { b.count >= 5 }
            #expect(b.take() == fromA)
            await a.client.close()
            await b.client.close()
        }
        await bed.server.shutdown()
        let afterShutdown = RelayChannel(server: bed.server)
        #expect(await afterShutdown.members.isEmpty, "answers (empty) rather than waiting for a stopped loop")
    }

    @Test func racingJoinsLeaveTheConnectionInExactlyOneChannel() async throws {
        let bed = try await ChannelTestBed()
        try await withTimeout(.seconds(60)) {  // 40 joins hop across loops: slow on a loaded machine, never stuck
            let alpha = RelayChannel(server: bed.server)
            let beta = RelayChannel(server: bed.server)
            let inAlpha = try await bed.connect(.quicOnly)
            let inBeta = try await bed.connect(.tcpOnly)
            let mover = try await bed.connect(.quicOnly)
            try await alpha.join(inAlpha.relaySide)
            try await beta.join(inBeta.relaySide)
            try await withThrowingDiscardingTaskGroup { group in
                for round in 0..<40 {
                    group.addTask { try await (round.isMultiple(of: 2) ? alpha : beta).join(mover.relaySide) }
                }
            }
            let alphaHasIt = await alpha.members.contains { $0.id == mover.relaySide.id }
            let betaHasIt = await beta.members.contains { $0.id == mover.relaySide.id }
            #expect(alphaHasIt != betaHasIt, "in one channel, never both or neither")
            let (hears, deaf) = alphaHasIt ? (inAlpha, inBeta) : (inBeta, inAlpha)

            let sent = try await mover.send(5, tag: 1)
            try await settle { hears.count >= 5 }
            #expect(hears.take() == sent, "its frames go to the channel it is in, once")
            #expect(deaf.take() == [])
            for peer in [inAlpha, inBeta, mover] { await peer.client.close() }
        }
        await bed.server.shutdown()
    }

    @Test func racingJoinsLeavesAndACloseEndWithTheConnectionInNoChannel() async throws {
        let bed = try await ChannelTestBed()
        try await withTimeout {
            let alpha = RelayChannel(server: bed.server)
            let beta = RelayChannel(server: bed.server)
            let listener = try await bed.connect(.quicOnly)
            let mover = try await bed.connect(.tcpOnly)
            try await alpha.join(listener.relaySide)
            try await withThrowingDiscardingTaskGroup { group in
                for round in 0..<60 {
                    let channel = round.isMultiple(of: 2) ? alpha : beta
                    if round % 3 == 0 {
                        group.addTask { await channel.leave(mover.relaySide) }
                    } else {
                        group.addTask { try await channel.join(mover.relaySide) }
                    }
                }
            }
            let alphaCount = await alpha.members.count { $0.id == mover.relaySide.id }
            let betaCount = await beta.members.count { $0.id == mover.relaySide.id }
            #expect(alphaCount + betaCount <= 1, "never in two channels, never twice in one")

            try await alpha.join(mover.relaySide)
            let sent = try await mover.send(5, tag: 1)
            try await settle { listener.count >= 5 }
            #expect(listener.take() == sent, "after the race it forwards like any member: once")
            let racers = (0..<20).map { round in
                Task { try await (round.isMultiple(of: 2) ? alpha : beta).join(mover.relaySide) }
            }
            await mover.client.close()
            for racer in racers { try await racer.value }
            var left = false
            for _ in 0..<4000 where !left {
                let everyone = await alpha.members + beta.members
                left = !everyone.contains { $0.id == mover.relaySide.id }
                if !left { try await Task.sleep(for: .milliseconds(5)) }
            }
            #expect(left, "a closed connection ends in no channel, whatever joins raced with its close")
            #expect(await alpha.members.map(\.id) == [listener.relaySide.id])
            await listener.client.close()
        }
        await bed.server.shutdown()
    }

    @Test func releasingTheChannelEmptiesIt() async throws {
        let bed = try await ChannelTestBed()
        try await withTimeout {
            let a = try await bed.connect(.quicOnly)
            let b = try await bed.connect(.tcpOnly)
            var channel: RelayChannel? = RelayChannel(server: bed.server)
            try await channel?.join(a.relaySide)
            try await channel?.join(b.relaySide)
            #expect(await channel?.members.count == 2)
            channel = nil

            let fromA = try await a.send(5, tag: 1)
            #expect(await Self.collect(5, from: a.relaySide) == fromA, "a's frames are its own again")
            #expect(b.take() == [], "nothing forwarded once the channel is gone")
            await a.client.close()
            await b.client.close()
        }
        await bed.server.shutdown()
    }

    @Test func aConnectionOfAnotherEndpointCannotJoin() async throws {
        let bed = try await ChannelTestBed()
        try await withTimeout {
            let channel = RelayChannel(server: bed.server)
            let peer = try await bed.connect(.quicOnly)
            let error = await #expect(throws: TransportError.self) { try await channel.join(peer.client) }
            #expect(error?.code == .invalidConfiguration)
            #expect(await channel.members.isEmpty)
            await channel.leave(peer.client)  // never a member: nothing happens
            await peer.client.close()
        }
        await bed.server.shutdown()
    }

    /// The next `count` datagrams of `connection`'s own sequence (fewer if they do not come within 2 s).
    static func collect(_ count: Int, from connection: TransportConnection) async -> [Frame] {
        let reader = Task { () -> [Frame] in
            var frames: [Frame] = []
            for await datagram in connection.datagrams {
                frames.append(Frame(bytes: datagram.payload))
                if frames.count == count { break }
            }
            return frames
        }
        return await firstValue(within: .seconds(2), reader) ?? []
    }
}
