import ChildProcesses
import Foundation
import PTTTalkGroups
import PTTTransport
import TestSupport
import Testing
import TransportCore
import TransportIO

/// The link-level data path end to end, over QUIC and TCP, through a relay that is shut down and restarted on the
/// same port: one `link.datagrams` loop hears the echo of frames sent on both connections and ends only when the
/// link stops; frames sent while the link reconnects are counted as dropped (and do not come back later);
/// `link.request` answers on each connection's own control stream; bad frames get the connection's typed errors.
@Suite("TransportLink data path: datagrams and requests across reconnects", .serialized, .integration)
struct LinkDataPathTests {
    /// A relay on QUIC and TCP (one port) that echoes every message and datagram, and answers early messages.
    static func configuration() -> ServerConfiguration {
        var configuration = Fixtures.serverConfiguration()
        configuration.tcp = "127.0.0.1:0"
        configuration.earlyData = .enabled(deliverBeforeHandshake: true)
        return configuration
    }

    static func link(_ path: TransportPath, _ address: ServerAddress) -> TransportLink {
        TransportLink(
            client: TransportClient(
                configuration: TransportLinkTests.configuration(path == .tcp ? .tcpOnly : .quicOnly)),
            to: address, rejoin: [EarlyMessage(TransportLinkTests.rejoin, replaySafe: true)],
            backoff: ReconnectBackoff(initial: .milliseconds(200), maximum: .seconds(1)))
    }

    /// Sends `frame` on the link every 20 ms until its echo reached `heard` (datagrams are unreliable).
    static func echo(_ frame: [UInt8], on link: TransportLink, heard: Locked<[[UInt8]]>) async throws {
        try await withTimeout {
            while !heard.withLock({ $0.contains(frame) }) {
                try link.sendDatagram(frame)
                try await Task.sleep(for: .milliseconds(20))
            }
        }
    }

    @Test(arguments: [TransportPath.quic, .tcp])
    func oneDatagramLoopAndRequestsSpanARelayRestart(path: TransportPath) async throws {
        var configuration = Self.configuration()
        let server = try await Fixtures.bindOnStablePort(configuration)
        let relay = Task { await EchoRelay.run(server) }
        let address = try #require(path == .tcp ? server.tcpAddress : server.quicAddress)
        let link = Self.link(path, address)
        let heard = Locked<[[UInt8]]>([])
        let listener = Task {
            for await frame in link.datagrams { heard.withLock { $0.append(frame.payload) } }
            return heard.withLock { $0.count }
        }
        let first = try await withTimeout { try await link.nextReady() }
        #expect(first.path == path)
        try await Self.echo([1, 1, 1], on: link, heard: heard)
        #expect(try await withTimeout { try await link.request(Array("ask one".utf8)) } == Array("ask one".utf8))
        #expect(link.datagramStatistics.droppedWhileReconnecting == 0)

        // Bad frames are refused with the connection's typed errors while ready...
        #expect(throws: TransportError.self) { try link.sendDatagram([]) }
        let maximum = first.maxDatagramPayloadSize
        #expect(maximum > 3)
        do {
            try link.sendDatagram([UInt8](repeating: 7, count: maximum + 1))
            Issue.record("an oversized frame was accepted")
        } catch let error as TransportError {
            #expect(error.code == .datagramTooLarge, "\(error)")
        }

        // The relay goes away: the link reconnects, and what the phone says meanwhile is dropped and counted.
        await server.shutdown()
        relay.cancel()
        try await withTimeout {
            while link.connection != nil || link.status == .ready { try await Task.sleep(for: .milliseconds(10)) }
        }
        let before = link.datagramStatistics
        for _ in 0..<5 { try link.sendDatagram([9, 9, 9]) }
        #expect(link.datagramStatistics.droppedWhileReconnecting == before.droppedWhileReconnecting + 5)
        #expect(link.datagramStatistics.sent == before.sent)
        // ...and bad frames are still refused, by the last connection's limits.
        do {
            try link.sendDatagram([])
            Issue.record("an empty frame was accepted while reconnecting")
        } catch let error as TransportError {
            #expect(error.code == .datagramEmpty, "\(error)")
        }
        do {
            try link.sendDatagram([UInt8](repeating: 7, count: maximum + 1))
            Issue.record("an oversized frame was accepted while reconnecting")
        } catch let error as TransportError {
            #expect(error.code == .datagramTooLarge, "\(error)")
        }

        configuration.quic = server.quicAddress?.description
        configuration.tcp = server.tcpAddress?.description
        let restarted = try await Fixtures.rebind(configuration)
        let secondRelay = Task { await EchoRelay.run(restarted) }
        defer { secondRelay.cancel() }
        let second = try await TransportLinkTests.replacement(of: first, in: link)
        #expect(second.path == path)
        try await Self.echo([2, 2, 2], on: link, heard: heard)
        #expect(try await withTimeout { try await link.request(Array("ask two".utf8)) } == Array("ask two".utf8))
        #expect(!heard.withLock { $0.contains([9, 9, 9]) }, "a frame sent while reconnecting came through later")
        let statistics = link.datagramStatistics
        #expect(statistics.received == UInt64(heard.withLock { $0.count }))
        #expect(statistics.sent >= 2 && statistics.droppedUnread == 0, "\(statistics)")

        // The loop ends only when the link stops.
        try await Task.sleep(for: .milliseconds(50))
        #expect(link.status == .ready)
        link.stop()
        let count = try await withTimeout { await listener.value }
        #expect(count >= 2)
        #expect(throws: TransportError.self) { try link.sendDatagram([3]) }
        await #expect(throws: TransportError.self) { try await link.request([3]) }
        await restarted.shutdown()
    }

    /// A relay SIGKILLed mid-call and started again (same port and keys: the link learns of it by a stateless
    /// reset): the same `link.datagrams` loop hears the echo before and after.
    @Test func oneDatagramLoopSpansAKilledAndRestartedRelay() async throws {
        let keys = FileManager.default.temporaryDirectory.appendingPathComponent("ptt-linkdata-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: keys, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: keys) }
        let (port, relay) = try await StablePort.first { port in
            (port, try await TransportLinkTests.childRelay(port, keys: keys))
        }
        defer { relay.kill() }
        let link = Self.link(.quic, ServerAddress(host: "127.0.0.1", port: port))
        let heard = Locked<[[UInt8]]>([])
        let listener = Task {
            for await frame in link.datagrams { heard.withLock { $0.append(frame.payload) } }
        }
        let first = try await withTimeout { try await link.nextReady() }
        try await Self.echo([1], on: link, heard: heard)

        relay.kill()
        _ = await relay.stop()
        let restarted = try await TransportLinkTests.childRelay(port, keys: keys)
        defer { restarted.kill() }
        // Audio keeps going out (to be answered by a stateless reset) until the link has a new connection.
        let talker = Task {
            while !Task.isCancelled {
                try? link.sendDatagram([5])
                try? await Task.sleep(for: .milliseconds(20))
            }
        }
        let second = try await TransportLinkTests.replacement(of: first, in: link)
        talker.cancel()
        #expect(second !== first)
        try await Self.echo([2], on: link, heard: heard)
        link.stop()
        try await withTimeout { await listener.value }
        #expect(heard.withLock { $0.contains([1]) && $0.contains([2]) })
        _ = await restarted.stop()
    }

    /// `wake(pending:)` returns a stream that yields the rejoin answers first, then the pending answers, whether
    /// the link was ready (pending joins the early stream) or reconnected (both went in 0-RTT).
    @Test(arguments: [TransportPath.quic, .tcp])
    func wakeAnswersStartWithTheRejoinAnswersReadyOrNot(path: TransportPath) async throws {
        let server = try await Fixtures.bindOnStablePort(Self.configuration())
        let events = EventLog()
        let relay = Task { await EchoRelay.run(server) { events.append($0) } }
        defer { relay.cancel() }
        let address = try #require(path == .tcp ? server.tcpAddress : server.quicAddress)
        let link = Self.link(path, address)
        let rejoin = TransportLinkTests.rejoin

        // Ready: the rejoin answer was not read yet; it comes first, then the pending answer.
        let first = try await withTimeout { try await link.nextReady() }
        let ready = try #require(
            try await withTimeout { try await link.wake(pending: [.init([1, 2], replaySafe: true)]) })
        #expect(try await withTimeout { try await ready.nextMessage()?.bytes } == rejoin)
        #expect(try await withTimeout { try await ready.nextMessage()?.bytes } == [1, 2])
        #expect(link.connection === first, "woken while ready: the same connection")
        try await TransportLinkTests.waitForResumptionState(link)

        // Suspended, then woken: a new connection, the rejoin and pending messages in its first flight.
        try await withTimeout { await link.suspend() }
        let woken = try #require(
            try await withTimeout { try await link.wake(pending: [.init([3, 4], replaySafe: true)]) })
        #expect(try await withTimeout { try await woken.nextMessage()?.bytes } == rejoin)
        #expect(try await withTimeout { try await woken.nextMessage()?.bytes } == [3, 4])
        let second = try #require(link.connection)
        #expect(second !== first)
        #expect(second.resumption == .resumed(earlyData: .accepted), "\(second.resumption)")

        // Ready again, the rejoin answer already read: the pending answer is next.
        let again = try #require(
            try await withTimeout { try await link.wake(pending: [.init([5], replaySafe: false)]) })
        #expect(try await withTimeout { try await again.nextMessage()?.bytes } == [5])
        link.stop()
        // The relay heard the rejoin message once per connection: a wake on a ready link re-sends nothing. (It
        // reports a message after echoing it: wait, bounded, for the reports.)
        _ = await eventually(within: .seconds(20)) { TransportLinkTests.rejoinsPerConnection(events).count >= 2 }
        #expect(TransportLinkTests.rejoinsPerConnection(events) == [1, 1], "\(events.all())")
        await server.shutdown()
    }

    /// A wake with nothing pending while the link's first connection is still being made returns that
    /// connection's early stream once it is ready (the README's phone does this at start), rejoin answer first.
    @Test(arguments: [TransportPath.quic, .tcp])
    func aWakeWhileConnectingReturnsTheFirstConnectionsAnswers(path: TransportPath) async throws {
        let server = try await Fixtures.bindOnStablePort(Self.configuration())
        let relay = Task { await EchoRelay.run(server) }
        defer { relay.cancel() }
        let link = Self.link(path, try #require(path == .tcp ? server.tcpAddress : server.quicAddress))
        // Bounded well under the link's idle timeout: a wake that waited for a newer attempt would return only after
        // the first connection died.
        let answers = try await withTimeout(.seconds(4)) { try await link.wake() }
        #expect(try await withTimeout { try await answers?.nextMessage()?.bytes } == TransportLinkTests.rejoin)
        link.stop()
        await server.shutdown()
    }
}

/// `RequestChannel` on a plain connection: concurrent requests each get the reply naming their ID, a request cancelled
/// while it waits leaves its late reply to be dropped, and replies nobody asked for (an extra copy, a stray ID, one
/// ahead of its request) are dropped and counted instead of shifting later answers (issue 33, finding 7).
@Suite("RequestChannel: replies matched by request ID", .integration)
struct RequestChannelTests {
    /// Body `slow:X` → X after 300 ms; `twice:X` → X, twice; `stray:X` → a reply under an ID no request had and one
    /// under the next request's ID, then X; `garbage` → a message that is not a reply; `quiet` → no reply, then
    /// the stream ends; anything else → itself.
    static func relay() async throws -> (TransportServer, ServerAddress, Task<Void, Never>) {
        try await ScriptedRelay.start { _, stream, message in
            let request = try RequestEnvelope(decoding: message.bytes)
            let text = String(decoding: request.body, as: UTF8.self)
            let answer = { (body: String) in try await stream.send(request.reply(Array(body.utf8)).encoded) }
            if text.hasPrefix("slow:") {
                try await Task.sleep(for: .milliseconds(300))
                try await answer(String(text.dropFirst(5)))
            } else if text.hasPrefix("twice:") {
                try await answer(String(text.dropFirst(6)))
                try await answer(String(text.dropFirst(6)))
            } else if text.hasPrefix("stray:") {
                try await stream.send(RequestEnvelope(id: 1 << 40, body: Array("stray".utf8)).encoded)
                try await stream.send(RequestEnvelope(id: request.id + 1, body: Array("ahead".utf8)).encoded)
                try await answer(String(text.dropFirst(6)))
            } else if text == "garbage" {
                try await stream.send([0xc0, 0x01])  // an 8-byte ID cut after two bytes
            } else if text == "quiet" {
                try await stream.finish()
            } else {
                try await answer(text)
            }
        }
    }

    @Test(arguments: [TransportPath.quic, .tcp])
    func concurrentRequestsGetTheirOwnRepliesAndACancelledOneShiftsNothing(path: TransportPath) async throws {
        let (server, address, relay) = try await Self.relay()
        defer { relay.cancel() }
        try await withTimeout(.seconds(60)) {
            let connection = try await ScriptedRelay.client(path).connect(to: address)
            let control = RequestChannel(stream: try await connection.openStream())
            let replies = try await withThrowingTaskGroup(of: (String, String).self) { group in
                for index in 0..<12 {
                    let text = index % 3 == 0 ? "slow:r\(index)" : "r\(index)"
                    group.addTask {
                        let reply = try await control.request(Array(text.utf8))
                        return (
                            text.replacingOccurrences(of: "slow:", with: ""), String(decoding: reply, as: UTF8.self)
                        )
                    }
                }
                return try await group.reduce(into: [(String, String)]()) { $0.append($1) }
            }
            #expect(replies.count == 12)
            #expect(replies.allSatisfy { $0.0 == $0.1 }, "\(replies)")

            // Cancelled while its reply is on the way: the next request gets its own reply, the late one is counted.
            let cancelled = Task { try await control.request(Array("slow:late".utf8)) }
            try await Task.sleep(for: .milliseconds(50))
            cancelled.cancel()
            await #expect(throws: CancellationError.self) { _ = try await cancelled.value }
            #expect(try await control.request(Array("next".utf8)) == Array("next".utf8))
            await #expect(throws: TransportError.self) { _ = try await control.request([]) }
            _ = await eventually(within: .seconds(20)) { control.statistics.late > 0 }
            #expect(control.statistics.late == 1, "\(control.statistics)")

            // The peer ends the stream without a reply: a typed error, not a hang.
            do {
                _ = try await control.request(Array("quiet".utf8))
                Issue.record("a request without a reply returned")
            } catch let error as TransportError {
                #expect(error.code == .streamClosed, "\(error)")
            }
            await connection.close()
        }
        await server.shutdown()
    }

    /// Finding 7: one extra reply in the middle shifted every later answer. Now a duplicate, a reply under an ID
    /// nobody had and one under the next request's ID are dropped and counted, and every answer stays with its
    /// request.
    @Test(arguments: [TransportPath.quic, .tcp])
    func extraRepliesInTheMiddleShiftNoLaterAnswer(path: TransportPath) async throws {
        let (server, address, relay) = try await Self.relay()
        defer { relay.cancel() }
        try await withTimeout {
            let connection = try await ScriptedRelay.client(path).connect(to: address)
            let control = RequestChannel(stream: try await connection.openStream())
            #expect(try await control.request(Array("a".utf8)) == Array("a".utf8))
            #expect(try await control.request(Array("twice:b".utf8)) == Array("b".utf8))
            #expect(try await control.request(Array("c".utf8)) == Array("c".utf8))
            // IDs 0-2 are answered; the relay's copy of "b" named ID 1 again. The next request is ID 3: the relay
            // sends "stray" (an unknown ID) and "ahead" (ID 4, before request 4 exists), then the real answer.
            #expect(try await control.request(Array("stray:d".utf8)) == Array("d".utf8))
            #expect(try await control.request(Array("e".utf8)) == Array("e".utf8), "not the early 'ahead'")
            for index in 0..<20 {
                #expect(try await control.request(Array("x\(index)".utf8)) == Array("x\(index)".utf8))
            }
            let statistics = control.statistics
            #expect(statistics.sent == 25 && statistics.answered == 25, "\(statistics)")
            #expect(statistics.duplicates == 1 && statistics.unknown == 2 && statistics.malformed == 0, "\(statistics)")
            await connection.close()
        }
        await server.shutdown()
    }

    /// A reply that is not an envelope (garbage) fails the waiting request and every later one with
    /// `requestMalformed`, instead of hanging or answering the wrong request; the connection stays up.
    @Test(arguments: [TransportPath.quic, .tcp])
    func aGarbageReplyIsATypedError(path: TransportPath) async throws {
        let (server, address, relay) = try await Self.relay()
        defer { relay.cancel() }
        try await withTimeout {
            let connection = try await ScriptedRelay.client(path).connect(to: address)
            let control = RequestChannel(stream: try await connection.openStream())
            #expect(try await control.request(Array("fine".utf8)) == Array("fine".utf8))
            for question in ["garbage", "after"] {
                do {
                    _ = try await control.request(Array(question.utf8))
                    Issue.record("\(question) returned after a garbage reply")
                } catch let error as TransportError {
                    #expect(error.code == .requestMalformed, "\(error)")
                }
            }
            #expect(control.statistics.malformed == 1)
            // The connection is fine: a new channel on a new stream works.
            let fresh = RequestChannel(stream: try await connection.openStream())
            #expect(try await fresh.request(Array("again".utf8)) == Array("again".utf8))
            await connection.close()
        }
        await server.shutdown()
    }
}
