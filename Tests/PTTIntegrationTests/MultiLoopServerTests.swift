import PTTTalkGroups
import PTTTransport
import TestSupport
import Testing
import TransportCore
import TransportIO

/// A server with several event loops (`ServerConfiguration.eventLoops`): every packet of a connection reaches the
/// loop that accepted it (the kernel's steering program reads the loop index from the connection ID, also after
/// the client's NAT rebinds), a relay channel forwards every frame once to listeners on every loop, and one loop
/// behaves as a single-threaded server.
@Suite("Multi-loop server", .serialized, .integration)
struct MultiLoopServerTests {
    static func configuration(loops: Int, steeringProgram: Bool = true) -> ServerConfiguration {
        var configuration = Fixtures.serverConfiguration()
        configuration.eventLoops = loops
        configuration.steeringProgram = steeringProgram
        return configuration
    }

    /// `clients` connections to an echo relay, each echoing `datagrams` datagrams; returns the relay's counters.
    static func echoCalls(
        _ configuration: ServerConfiguration, clients: Int, datagrams: Int
    ) async throws -> (TransportServer, [QUICLoopCounters], [Int]) {
        let server = try await TransportServer.bind(configuration: configuration)
        let relay = Task { await EchoRelay.run(server) }
        defer { relay.cancel() }
        let address = server.quicAddress!
        let echoed = try await withTimeout(.seconds(60)) {
            try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<clients {
                    group.addTask {
                        let connection = try await Fixtures.client().connect(to: address)
                        let received = Locked(0)
                        await connection.setDatagramHandler { _ in received.withLock { $0 += 1 } }
                        for index in 0..<datagrams {
                            try connection.sendDatagram([UInt8(index % 256)] + [UInt8](repeating: 1, count: 99))
                            try await Task.sleep(for: .milliseconds(1))
                        }
                        _ = await eventually(within: .seconds(20)) { received.withLock { $0 } >= datagrams }
                        await connection.close()
                        return received.withLock { $0 }
                    }
                }
                var echoed: [Int] = []
                for try await count in group { echoed.append(count) }
                return echoed
            }
        }
        let counters = await server.quicLoopCounters()
        return (server, counters, echoed)
    }

    @Test func everyPacketOfAConnectionReachesTheLoopThatOwnsIt() async throws {
        let (server, counters, echoed) = try await Self.echoCalls(
            Self.configuration(loops: 2), clients: 16, datagrams: 100)
        #expect(server.loops.count == 2)
        #expect(server.steering == .kernelProgram, "the kernel accepted the steering program and the probe passed")
        #expect(echoed.allSatisfy { $0 >= 95 }, "echoes per client: \(echoed)")
        #expect(counters.count == 2)
        #expect(counters.allSatisfy { $0.packetsReceived > 0 }, "16 clients hash to both loops: \(counters)")
        #expect(
            counters.allSatisfy { $0.packetsHandedOver == 0 && $0.packetsTakenOver == 0 },
            "no packet arrived at a loop that does not own its connection: \(counters)")
        await server.shutdown()
    }

    @Test func withoutTheProgramTheLoopsHandPacketsToTheirOwner() async throws {
        let (server, counters, echoed) = try await Self.echoCalls(
            Self.configuration(loops: 2, steeringProgram: false), clients: 8, datagrams: 50)
        #expect(server.steering == .forwarding)
        #expect(echoed.allSatisfy { $0 >= 48 }, "echoes per client: \(echoed)")
        let handedOver = counters.map(\.packetsHandedOver).reduce(0, +)
        #expect(handedOver == counters.map(\.packetsTakenOver).reduce(0, +), "\(counters)")
        await server.shutdown()
    }

    @Test(arguments: [true, false])
    func aCallSurvivesNATRebindingsOnItsLoop(steeringProgram: Bool) async throws {
        // The source port changes every 100 ms: each new 4-tuple would hash to either loop.
        let call = try await NATRebindingTests.call(["--rebind-after", "30", "--storm-ms", "100"]) {
            $0.eventLoops = 2
            $0.steeringProgram = steeringProgram
        }
        // The call must stay up; the echo rate under a storm is NATRebindingTests' bar. Here, with the other
        // suites running beside this one (and more so under ThreadSanitizer), validating each new path costs more
        // echoes (204 and 208 of 300 seen), so half is the floor; the steering is judged by the counters below.
        #expect(call.echoed >= 150, "\(call.counters)")
        #expect((call.counters["rebindings"] as? Int ?? 0) >= 2, "\(call.counters)")
        if steeringProgram {
            #expect(call.steering == .kernelProgram)
            #expect(call.loopCounters.allSatisfy { $0.packetsHandedOver == 0 }, "\(call.loopCounters)")
        } else {
            #expect(call.steering == .forwarding)
        }
    }

    @Test func oneLoopServesAsASingleThreadedServer() async throws {
        let (server, counters, echoed) = try await Self.echoCalls(
            Self.configuration(loops: 1), clients: 4, datagrams: 50)
        #expect(server.loops.count == 1 && server.steering == .single)
        #expect(echoed.allSatisfy { $0 >= 48 }, "echoes per client: \(echoed)")
        #expect(counters.count == 1 && counters[0].packetsHandedOver == 0)
        await server.shutdown()
    }

    /// Over QUIC the kernel's hash spreads the clients' Initials over the loops; over TCP it spreads the
    /// connections over the loops' listeners.
    @Test(arguments: [FallbackPolicy.quicOnly, .tcpOnly])
    func aChannelForwardsEveryFrameOnceToListenersOnEveryLoop(policy: FallbackPolicy) async throws {
        let bed = try await ChannelTestBed(eventLoops: 2)
        try await withTimeout {
            let statistics = FanoutStatistics()
            let channel = RelayChannel(server: bed.server, statistics: statistics)
            var peers: [ChannelPeer] = []
            for _ in 0..<12 { peers.append(try await bed.connect(policy)) }
            #expect(peers.allSatisfy { $0.client.path == (policy == .tcpOnly ? .tcp : .quic) })
            for peer in peers { try await channel.join(peer.relaySide) }
            #expect(await channel.members.map(\.id) == peers.map(\.relaySide.id), "join order across loops")
            let loops = peers.map { bed.server.loopIndex(of: $0.relaySide) }
            #expect(Set(loops) == [0, 1], "12 clients hash to both loops (all on one: 1 chance in 2,048)")
            #expect(await bed.server.connectionCount() == 12, "counted once, server-wide")
            // A talker on each loop.
            let talkers = [loops.firstIndex(of: 0)!, loops.firstIndex(of: 1)!]
            _ = statistics.take()
            var sent: [Int: [Frame]] = [:]
            for (tag, talker) in talkers.enumerated() {
                sent[talker] = try await peers[talker].send(40, tag: UInt8(tag + 1))
            }
            let expected = peers.indices.map { index in talkers.filter { $0 != index }.map { sent[$0]! } }
            let members = peers
            try await settle {
                members.indices.allSatisfy { members[$0].count >= expected[$0].map(\.count).reduce(0, +) }
            }
            for (index, peer) in peers.enumerated() {
                // Each talker's frames once and in order; two talkers' frames may interleave (they travel
                // through different loops).
                let received = peer.take()
                let byTalker = expected[index].map { frames in received.filter { $0.bytes[0] == frames[0].bytes[0] } }
                #expect(byTalker == expected[index], "listener \(index) on loop \(loops[index] ?? -1)")
                #expect(received.count == expected[index].map(\.count).reduce(0, +), "nothing else, nothing twice")
            }
            let snapshot = statistics.take()
            #expect(snapshot.framesReceived == 80)
            #expect(snapshot.copiesQueued == 80 * 11, "each frame to the 11 other members, counted once")
            #expect(snapshot.forwardingLatencies.count == 80)
            for peer in peers { await peer.client.close() }
        }
        await bed.server.shutdown()
    }
}
