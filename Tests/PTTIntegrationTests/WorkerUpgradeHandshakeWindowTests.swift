import ChildProcesses
import Foundation
import Glibc
import PTTTransport
import TestSupport
import Testing
import TransportCore

extension WorkerUpgradeTests {
    /// Whether `events` hold a move notice (a draining relay's, with time left) on a server stream.
    static func heardMoveNotice(_ events: [QUICEvent]) -> Bool {
        events.contains { event in
            guard case .streamData(let id, let bytes, true, _) = event, id & 0x3 == 0x3,
                case .move(let closingIn)? = RelayNotice(decoding: bytes)
            else { return false }
            return closingIn > 0
        }
    }

    /// The window at the swap: a client whose first flight reached the old generation answers the relay's flight
    /// only after the steering program moved new connections to the new generation (the test holds its answer
    /// until the supervisor logged `upgraded`). Its Handshake packets carry the old worker's connection ID, which
    /// the program steers to that worker whatever generation serves; the handshake completes there and the
    /// draining worker asks the client to move, as it asks every client it has.
    @Test func aHandshakeAnsweredAfterTheSwapCompletesOnTheOldGeneration() async throws {
        let (directory, relay, address, _) = try await Self.start()
        defer {
            relay.stopNow()
            try? FileManager.default.removeItem(at: directory)
        }
        let client = try HeldAnswerClient(port: address.port)
        let began = ContinuousClock.now
        #expect(await onThread { client.holdAnswer() }, "the relay answered the first flight: \(client.events)")

        kill(relay.processIdentifier, SIGUSR2)
        let upgraded = await relay.errorLine(containing: "\"event\":\"upgraded\"", within: .seconds(60))
        try #require(upgraded != nil, "the upgrade completed")
        // The old worker gives a handshake 10 s (the relay's handshake timeout) from its first flight: a machine
        // so loaded that the new generation took longer to start leaves nothing to see here.
        guard ContinuousClock.now - began < .seconds(8) else {
            print("skipped: the upgrade took \(ContinuousClock.now - began), past the held handshake's 10 s timeout")
            return
        }

        let answer = client.firstHeldType.map { "\($0)" } ?? "a short header"
        await onThread { client.release() }
        let moved = await onThread { client.run(within: 30, until: Self.heardMoveNotice) }
        let events = client.events
        #expect(moved, "the old worker completed the handshake and asked to move (answer: \(answer)): \(events)")
        await onThread { client.close() }
    }
}
