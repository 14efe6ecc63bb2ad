import CNgtcp2
import Glibc
import Testing

@testable import TransportCore

/// GnuTLS refuses early data for tickets created before its anti-replay context (a restarted relay). With a store
/// that outlives the process, the context's recording start is kept one window back through the version- and
/// layout-checked shim, so a relay made after the ticket accepts its 0-RTT once; with the in-process store it
/// still refuses (today's behaviour); and a store whose memory began after the ticket refuses it.
@Suite("GnuTLS recording start with a store that outlives the process (sans-IO)")
struct RecordingStartTests {
    /// What the fleet's Redis gives, kept in this test's memory: each ticket accepted once, by whichever context
    /// asks; a ticket GnuTLS let through with a start before the store's memory is refused. `asynchronous`: it
    /// answers after a round trip, as Redis does — `admit` asks, and claims wait in `waiting` until
    /// `answerWaiting()`.
    final class SetOnceStore: ZeroRTTAdmission {
        var used: Set<TicketDigest> = []
        var rememberedSince: Int64?
        var counters = AntiReplayCounters()
        let window: Int64 = 3600
        var asynchronous = false
        var waiting: [() -> Void] = []
        var outlivesProcess: Bool { true }

        init(rememberedSince: Int64? = nil, asynchronous: Bool = false) {
            self.rememberedSince = rememberedSince
            self.asynchronous = asynchronous
        }

        func issue(_ ticket: TicketDigest) -> Bool { true }

        func admit(_ ticket: TicketDigest, recordingStart: Int64) -> ZeroRTTDecision {
            guard recordingStart >= (rememberedSince ?? 0) else {
                counters.unknown += 1
                return .refuse
            }
            guard !asynchronous else { return .ask }
            guard take(ticket) else { return .refuse }
            counters.accepted += 1
            return .accept
        }

        func claim(_ ticket: TicketDigest, answer: @escaping (Bool) -> Void) {
            waiting.append { [unowned self] in answer(take(ticket)) }
        }

        /// Answers every claim made so far; whether there was any.
        @discardableResult
        func answerWaiting() -> Bool {
            let answers = waiting
            waiting = []
            for answer in answers { answer() }
            return !answers.isEmpty
        }

        func count(_ tally: ZeroRTTTally) { counters.count(tally) }

        private func take(_ ticket: TicketDigest) -> Bool {
            guard used.insert(ticket).inserted else {
                counters.duplicates += 1
                return false
            }
            return true  // counted as accepted by admit, or when GnuTLS takes a claim's answer (count(_:))
        }
    }

    static func context(_ store: (any ZeroRTTAdmission)?) throws -> TLSServerContext {
        try TLSServerContext(
            certificateChain: TestCertificates.pem(TestCertificates.serverCert),
            privateKey: TestCertificates.pem(TestCertificates.serverKey),
            ticketKey: ZeroRTTTests.ticketKey, earlyDataWindow: 3_600_000, antiReplayStore: store)
    }

    /// A client resuming `saved` at `tls` with an early message: whether its early data was accepted, and the
    /// first flight it sent.
    static func wake(_ saved: ClientResumption, at tls: TLSServerContext) throws -> (Bool?, [[UInt8]]) {
        let net = try VirtualNetwork(tls: tls)
        net.onServerEvent = { connection, event in
            if case .streamData(let id, let bytes, let fin, _) = event {
                try? connection.write(stream: id, bytes, fin: fin)
            }
        }
        let client = try net.addClient(resumption: saved)
        let stream = try #require(try client.openBidirectionalStream())
        try client.write(stream: stream, Array("wake".utf8), fin: true)
        #expect(net.run { net.clientStreamData(stream, client: 0).fin })
        return (client.earlyDataAccepted, net.firstFlight(client: 0))
    }

    @Test func aRelayMadeAfterTheTicketAcceptsItsZeroRTTOnlyWithTheSharedStore() throws {
        let fleet = SetOnceStore()
        let issuing = try Self.context(fleet)
        #expect(issuing.antiReplay?.backdatesStart == true, "GnuTLS \(String(cString: gnutls_check_version(nil)))")
        let saved = try ZeroRTTTests.firstConnection(try VirtualNetwork(tls: issuing))
        usleep(20_000)  // the relays below start strictly after the ticket was created

        let inProcess = try Self.context(nil)
        #expect(inProcess.antiReplay?.backdatesStart == false)
        #expect(try Self.wake(saved, at: inProcess).0 == false, "without the shared store: refused, as before")

        let restarted = try Self.context(fleet)
        let (accepted, flight) = try Self.wake(saved, at: restarted)
        #expect(accepted == true, "a restarted relay of the fleet accepts a ticket issued before it started")
        #expect(fleet.counters.accepted == 1)

        let another = try Self.context(fleet)
        let net = try VirtualNetwork(tls: another)
        for packet in flight { net.inject(packet, fromClient: 100) }
        net.run(for: 5 * nanosecondsPerSecond)
        #expect(fleet.counters.accepted == 1, "the flight replayed to another relay of the fleet is refused")
        #expect(fleet.counters.duplicates >= 1)
    }

    @Test func aTicketOlderThanTheStoresMemoryIsRefused() throws {
        let issuing = try Self.context(SetOnceStore())
        let saved = try ZeroRTTTests.firstConnection(try VirtualNetwork(tls: issuing))
        let lostMemory = SetOnceStore(rememberedSince: Int64(time(nil)) + 2)  // Redis lost its keys after the ticket
        #expect(try Self.wake(saved, at: try Self.context(lostMemory)).0 == false)
        #expect(lostMemory.counters.accepted == 0)
    }
}
