import ChildProcesses
import Foundation
import PTTTransport
import TestSupport
import Testing
import TransportCore
import TransportIO

/// A relay in a child process (`ptt-transport serve --events`) attacked by `Tests/Peers/quic_attacker.py`, an
/// aioquic client that completes a handshake and then sends NEW_CONNECTION_ID frames that abort ngtcp2 0.12.1
/// unguarded. In a child so that an abort fails the test instead of killing the test runner.
@Suite("Hostile peers cannot abort the relay", .serialized, .enabled(if: peersEnabled), .integration)
struct HostilePeerTests {
    static let attacker = "\(Fixtures.root)/Tests/Peers/quic_attacker.py"

    /// A legitimate call in progress: one control stream and the datagram echoes it has seen.
    struct Call {
        let connection: TransportConnection
        let stream: TransportStream
        let echoedDatagrams = Locked<Set<[UInt8]>>([])

        /// Connects with `client` (QUIC by default; `TCPFallbackTests.client(.tcpOnly)` for QMux over TCP).
        init(_ address: ServerAddress, client: TransportClient = Fixtures.client()) async throws {
            connection = try await client.connect(to: address)
            stream = try await connection.openStream()
            await connection.setDatagramHandler { [echoedDatagrams] datagram in
                echoedDatagrams.withLock { _ = $0.insert(datagram.payload) }
            }
        }

        /// A control message and an audio frame both come back.
        func roundTrip(_ label: String) async throws -> Bool {
            let message = Array("control \(label)".utf8)
            try await stream.send(message)
            let echo = try await withTimeout(.seconds(10)) { [stream] in
                var messages = stream.messages.makeAsyncIterator()  // one message per round trip
                return try await messages.next()?.bytes
            }
            let frame = Array("audio \(label)".utf8)
            for _ in 0..<500 where !echoedDatagrams.withLock({ $0.contains(frame) }) {
                try connection.sendDatagram(frame)
                try await Task.sleep(for: .milliseconds(20))
            }
            return echo == message && echoedDatagrams.withLock { $0.contains(frame) }
        }
    }

    static func runAttacker(_ address: ServerAddress, _ arguments: [String]) async throws -> [String: Any] {
        let result = try await runProgram(
            try AioquicInteropTests.python,
            [
                attacker, "127.0.0.1", "\(address.port)", "--ca", Fixtures.ca,
            ] + arguments)
        #expect(result.status == 0, "\(result.stderr)")
        return try #require(jsonObject(result.stdout), "attacker printed: \(result.stdout) \(result.stderr)")
    }

    @Test(arguments: ["ncid-one-packet", "ncid-two-packets", "ncid-0rtt"])
    func newConnectionIDAttackClosesOnlyTheAttacker(attack: String) async throws {
        let relay = try await startChildRelay()
        defer { relay.stopNow() }
        let address = try #require(ServerAddress(relay.address))
        let call = try await Call(address)
        #expect(try await call.roundTrip("before the attack"))

        let verdict = try await Self.runAttacker(address, ["--attack", attack])

        #expect(relay.isRunning, "the relay died (status \(relay.terminationStatus))")
        #expect(try await call.roundTrip("after the attack"), "the call in progress stopped working")
        let next = try await Call(address)
        #expect(try await next.roundTrip("next client"), "the next client was not served")
        await next.connection.close()
        await call.connection.close()

        let (status, events) = await relay.stop()
        #expect(status == 0, "serve exited with \(status): \(events)")
        guard LinkedNgtcp2.has(.retiresTwice) else {
            // ngtcp2 1.4.0 and later skip a sequence number they already retired: nothing aborts, and the frame
            // guard, off for this generation, must not close a peer that only repeated a frame.
            #expect(!events.contains("NEW_CONNECTION_ID that would retire"), "\(events)")
            return
        }
        // The relay closed the attacker with PROTOCOL_VIOLATION and said why.
        #expect(
            events.contains("protocol-violation: the peer sent a NEW_CONNECTION_ID that would retire sequence"),
            "\(events)")
        if attack != "ncid-two-packets" {
            // (After the two-packet attack the relay addresses the attacker by a connection ID the attacker made
            // up and never registered, so the attacker's own QUIC stack drops the CONNECTION_CLOSE.)
            #expect(verdict["error_code"] as? Int == 0x0a, "\(verdict)")
        }
    }

    @Test func finishedFollowedByAForbiddenFrameClosesOnlyThatConnection() async throws {
        // The server's TLS completes on the Finished, then the same packet fails: the connection must be closed
        // at once (transport close), never left between "TLS finished" and "handshake complete", where an
        // application close (e.g. the relay shutting down) aborts ngtcp2 0.12.1.
        let relay = try await startChildRelay()
        defer { relay.stopNow() }
        let address = try #require(ServerAddress(relay.address))
        let verdict = try await Self.runAttacker(address, ["--attack", "finished-then-stream"])
        #expect(verdict["error_code"] as? Int == 0x0a, "\(verdict)")
        #expect(relay.isRunning)
        let next = try await Call(address)
        #expect(try await next.roundTrip("next client"))
        // SIGINT: the relay exits 0 at once (SIGTERM would drain: see DrainTests).
        let (status, events) = await relay.stop()
        #expect(status == 0, "serve exited with \(status): \(events)")
    }

    @Test func emptyDatagramIsDroppedAndTheCallGoesOn() async throws {
        // An echo relay would send the empty payload back; ngtcp2 0.12.1 asserts on a 0-length DATAGRAM write.
        let relay = try await startChildRelay()
        defer { relay.stopNow() }
        let address = try #require(ServerAddress(relay.address))
        let verdict = try await Self.runAttacker(address, ["--attack", "empty-datagram"])
        #expect(verdict["closed_by_peer"] as? Bool == false, "\(verdict)")
        #expect(verdict["echoes"] as? Int == 2, "\(verdict)")  // before and after the empty DATAGRAM
        let (status, events) = await relay.stop()
        #expect(status == 0, "serve exited with \(status): \(events)")
        #expect(events.contains(#""bytes":0,"event":"datagram""#), "\(events)")
    }

    @Test func legitimateConnectionIDRotationKeepsWorking() async throws {
        let relay = try await startChildRelay()
        defer { relay.stopNow() }
        let address = try #require(ServerAddress(relay.address))
        let verdict = try await Self.runAttacker(address, ["--attack", "rotate", "--rotations", "6"])
        #expect(verdict["closed_by_peer"] as? Bool == false, "\(verdict)")
        #expect(verdict["echoes"] as? Int == 8, "\(verdict)")  // before, one per rotation, after
        #expect(relay.isRunning)
    }
}
