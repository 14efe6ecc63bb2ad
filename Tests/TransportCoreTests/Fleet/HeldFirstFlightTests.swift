import Testing

@testable import TransportCore

/// A shared anti-replay store answers after a round trip: the server holds a wake's first flight while the
/// ticket's claim is in flight — sending nothing, serving everyone else — and feeds it again with the answer, over
/// QUIC and over TCP (QMux). A replay of the flight to another relay of the fleet is held too and refused; over the
/// bound of held flights the early data is refused at once and the handshake goes on in 1-RTT. Sans-IO, with a
/// store kept in the test's memory that answers when the test says (`SetOnceStore(asynchronous: true)`).
@Suite("First flights held while a shared store is asked (sans-IO)")
struct HeldFirstFlightTests {
    typealias Store = RecordingStartTests.SetOnceStore

    static func context(_ store: Store, maxHeldFlights: Int = 512) throws -> TLSServerContext {
        try TLSServerContext(
            certificateChain: TestCertificates.pem(TestCertificates.serverCert),
            privateKey: TestCertificates.pem(TestCertificates.serverKey),
            ticketKey: ZeroRTTTests.ticketKey, earlyDataWindow: 3_600_000, antiReplayStore: store,
            maxHeldFlights: maxHeldFlights)
    }

    /// A relay whose store answers when the test says (echoing), after a first connection saved a ticket.
    static func relay(maxHeldFlights: Int = 512) throws -> (Store, TLSServerContext, VirtualNetwork, ClientResumption) {
        let store = Store(asynchronous: true)
        let tls = try Self.context(store, maxHeldFlights: maxHeldFlights)
        let net = try VirtualNetwork(oneWayDelay: 25 * nanosecondsPerMillisecond, tls: tls)
        net.installEcho()
        return (store, tls, net, try ZeroRTTTests.firstConnection(net))
    }

    /// Client 1 of `net` resumes `saved` with an early message: its stream.
    static func wake(_ net: VirtualNetwork, _ saved: ClientResumption) throws -> (QUICConnection, Int64) {
        let client = try net.addClient(resumption: saved)
        let stream = try #require(try client.openBidirectionalStream())
        try client.write(stream: stream, Array("wake".utf8), fin: true)
        return (client, stream)
    }

    @Test func aQUICWakeIsHeldUntilTheStoreAnswersThenAcceptedOnce() throws {
        let (store, tls, net, saved) = try Self.relay()
        let (client, stream) = try Self.wake(net, saved)
        let address = net.clientAddress.with(port: 50001)

        #expect(net.run(for: nanosecondsPerSecond) { net.server.heldFlightCount == 1 })
        net.run(for: 300 * nanosecondsPerMillisecond)  // the client sends its Initial again meanwhile: held too
        #expect(net.serverBytesTo[address, default: 0] == 0, "nothing is sent while the claim is in flight")
        #expect(tls.antiReplay?.heldFlights == 1)
        #expect(store.counters.accepted == 0)

        #expect(
            net.run {
                store.answerWaiting()
                return net.clientStreamData(stream, client: 1).fin
            })
        #expect(client.earlyDataAccepted == true)
        #expect(store.counters.accepted == 1)
        #expect(net.serverStreamChunks().contains { $0.isEarly && $0.bytes == Array("wake".utf8) })
        #expect(net.server.heldFlightCount == 0)
        #expect(tls.antiReplay?.heldFlights == 0, "the flight's place in the bound is given back")

        // The same first flight replayed to another relay of the fleet: held, asked, refused.
        let flight = net.firstFlight(client: 1)
        let another = try VirtualNetwork(tls: try Self.context(store))
        for packet in flight { another.inject(packet, fromClient: 7) }
        #expect(another.run(for: nanosecondsPerSecond) { another.server.heldFlightCount == 1 })
        another.run(for: 2 * nanosecondsPerSecond) {
            store.answerWaiting()
            return false
        }
        #expect(store.counters.accepted == 1, "the replay is refused")
        #expect(store.counters.duplicates >= 1)
        #expect(!another.serverStreamChunks().contains { $0.isEarly }, "no early data of the replay delivered")
    }

    @Test func overTheBoundOfHeldFlightsZeroRTTIsRefusedAtOnceAndTheWakeGoesOnIn1RTT() throws {
        let (store, _, net, saved) = try Self.relay(maxHeldFlights: 0)
        let (client, stream) = try Self.wake(net, saved)
        #expect(net.run { net.clientStreamData(stream, client: 1).fin })
        #expect(client.isResumed)
        #expect(client.earlyDataAccepted == false)
        #expect(store.waiting.isEmpty, "nothing was asked")
        #expect(store.counters.notHeld == 1, "the refusal is counted")
        #expect(net.server.heldFlightCount == 0)
    }

    /// A held flight fed again is one connection for its source's budget, not two: a storm of wakes from one address
    /// (phones behind one NAT) is charged once per phone.
    @Test func aFlightFedAgainIsChargedOnceToItsSource() throws {
        let (store, _, net, saved) = try Self.relay()
        // A fresh budget with room for one new connection (then one a second): a second charge for the wake fails.
        net.server.limits.perSource = SourceLimits(maxLive: 10, perSecond: 1, burst: 1)
        let (client, stream) = try Self.wake(net, saved)
        #expect(net.run(for: nanosecondsPerSecond) { net.server.heldFlightCount == 1 })
        #expect(
            net.run {
                store.answerWaiting()
                return net.clientStreamData(stream, client: 1).fin
            })
        #expect(client.earlyDataAccepted == true, "the flight fed again was admitted on its first charge")
    }

    /// GnuTLS ignores bytes after a ticket's MAC: the claim's key is what the MAC covers, so such a ticket is the
    /// same ticket.
    @Test func aTicketWithBytesAfterItsMACHasTheSameKey() {
        let state = [UInt8](repeating: 7, count: 48)
        let ticket =
            [UInt8](repeating: 1, count: 32) + [0, UInt8(state.count)] + state + [UInt8](repeating: 9, count: 20)
        #expect(GnuTLSAntiReplay.digest(ticket + [0]) == GnuTLSAntiReplay.digest(ticket))
        #expect(
            GnuTLSAntiReplay.digest(ticket + [UInt8](repeating: 0xAB, count: 300)) == GnuTLSAntiReplay.digest(ticket))
        var otherState = ticket
        otherState[40] ^= 1
        #expect(GnuTLSAntiReplay.digest(otherState) != GnuTLSAntiReplay.digest(ticket))
        #expect(GnuTLSAntiReplay.macCovered(ticket).count == 34 + state.count)
        #expect(GnuTLSAntiReplay.macCovered(Array(ticket.prefix(60))).count == 60, "too short for its MAC: whole")
        #expect(GnuTLSAntiReplay.macCovered([1, 2, 3]).count == 3)
    }

    @Test func aTCPWakeIsHeldUntilTheStoreAnswersThenAcceptedOnceAndItsReplayRefused() throws {
        typealias Pair = QMuxOverTLSTests.Pair
        let store = Store(asynchronous: true)
        let context = try Self.context(store)
        let (ticket, parameters) = try QMuxOverTLSTests.resumptionMaterial(context)
        let pair = try Pair(ticket: ticket, serverContext: context, remembered: parameters, early: Array("join 7".utf8))
        let firstFlight = pair.client.takeCiphertext(now: pair.now)
        firstFlight.withUnsafeBytes { pair.server.receive($0, now: pair.now) }
        pair.run()
        var claim: ZeroRTTClaim? = pair.server.takeClaimToStart()  // the handshake is held for the claim
        #expect(pair.server.takeClaimToStart() == nil, "announced once")
        #expect(!pair.client.isReady, "the server sent nothing while the claim is in flight")
        #expect(context.antiReplay?.heldFlights == 1)
        store.claim(claim!.ticket) { [claim] in pair.server.claimAnswered(claim!, accepted: $0, now: pair.now) }
        claim = nil  // the claim's owner lets go once it answered (the pump's closure does)
        store.answerWaiting()
        pair.run()
        #expect(pair.client.isReady && pair.client.isResumed)
        #expect(pair.client.earlyDataAccepted == true)
        #expect(
            QMuxOverTLSTests.earlyChunks(pair.serverEvents).map(\.bytes).joined().elementsEqual(Array("join 7".utf8)))
        #expect(store.counters.accepted == 1)
        #expect(context.antiReplay?.heldFlights == 0)

        // The flight replayed to another relay of the fleet over TCP: held, refused, never delivered.
        let replayed = try QMuxOverTLS(server: try Self.context(store), parameters: QUICParameters(), now: pair.now)
        firstFlight.withUnsafeBytes { replayed.receive($0, now: pair.now) }
        _ = replayed.takeCiphertext(now: pair.now)
        let held = try #require(replayed.takeClaimToStart())
        store.claim(held.ticket) { replayed.claimAnswered(held, accepted: $0, now: pair.now) }
        store.answerWaiting()
        _ = replayed.takeCiphertext(now: pair.now)
        while let event = replayed.nextEvent() {
            if case .streamData = event { Issue.record("a replay delivered early data") }
        }
        #expect(store.counters.accepted == 1)
        #expect(store.counters.duplicates == 1)
    }
}
