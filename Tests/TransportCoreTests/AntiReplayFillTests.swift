import Foundation
import Glibc
import Testing

@testable import TransportCore

/// The 0-RTT anti-replay store against a stranger who fills it (issue 21, item 13), with real GnuTLS sessions over
/// TCP (TLS records in memory) and QUIC (a virtual network). Two attacks: one ticket resumed over and over with a
/// fresh ClientHello each time (a fresh binder, GnuTLS' own key), and many tickets — one full handshake each, as
/// from many sources — each spent once on 0-RTT. The store reserves an entry for every ticket it issues within its
/// budget, so neither attack takes the 0-RTT of a ticket already in a real client's hands; before, each first use
/// took an entry until the store was full and refused everyone's 0-RTT.
@Suite("0-RTT anti-replay: a stranger cannot fill the store")
struct AntiReplayFillTests {
    typealias Pair = QMuxOverTLSTests.Pair

    static func context(capacity: Int, windowMilliseconds: UInt32 = 3_600_000) throws -> TLSServerContext {
        try TLSServerContext(
            certificateChain: TestCertificates.pem(TestCertificates.serverCert),
            privateKey: TestCertificates.pem(TestCertificates.serverKey),
            ticketKey: [UInt8](repeating: 5, count: 64), earlyDataWindow: windowMilliseconds,
            antiReplayCapacity: capacity)
    }

    /// Over TCP: whether a ClientHello resuming `ticket` with early data had it accepted (it always resumes).
    static func wake(_ context: TLSServerContext, ticket: (ticket: [UInt8], parameters: [UInt8])) throws -> Bool {
        let pair = try Pair(
            ticket: ticket.ticket, serverContext: context, remembered: ticket.parameters, early: Array("wake".utf8))
        pair.run()
        #expect(pair.client.isReady && pair.client.isResumed, "every attempt still resumes (1-RTT at worst)")
        return pair.client.earlyDataAccepted == true
    }

    @Test func oneTicketResumedOverAndOverOverTCPCarriesZeroRTTOnce() throws {
        let context = try Self.context(capacity: 16)
        let real = try QMuxOverTLSTests.resumptionMaterial(context)
        let attacker = try QMuxOverTLSTests.resumptionMaterial(context)
        var accepted = 0
        for _ in 0..<100 where try Self.wake(context, ticket: attacker) { accepted += 1 }
        #expect(accepted == 1, "the ticket carried 0-RTT \(accepted) times")
        let store = try #require(context.antiReplayStore)
        #expect(store.count <= 16, "the store never holds more than its budget")
        #expect(try Self.wake(context, ticket: real), "a real client's 0-RTT was refused")
    }

    @Test func manyTicketsEachSpentOnceOverTCPLeaveARealTicketItsZeroRTT() throws {
        let budget = 12
        let context = try Self.context(capacity: budget)
        let real = try QMuxOverTLSTests.resumptionMaterial(context)
        // The attacker completes three budgets' worth of handshakes, then spends every ticket on 0-RTT.
        let tickets = try (0..<(3 * budget)).map { _ in try QMuxOverTLSTests.resumptionMaterial(context) }
        let accepted = try tickets.filter { try Self.wake(context, ticket: $0) }.count
        let store = try #require(context.antiReplayStore)
        #expect(accepted < budget, "the attacker's 0-RTT is bounded by the budget the real ticket left")
        #expect(store.count <= budget)
        #expect(store.counters.overBudget > 0, "tickets issued beyond the budget were not recorded")
        #expect(try Self.wake(context, ticket: real), "a real client's ticket lost its 0-RTT to the flood")
        #expect(!(try Self.wake(context, ticket: real)), "and it carries 0-RTT once")
    }

    @Test func manyTicketsEachSpentOnceOverQUICLeaveARealTicketItsZeroRTT() throws {
        let budget = 6
        let context = try Self.context(capacity: budget)
        let net = try VirtualNetwork(tls: context)
        net.installEcho()
        let real = try Self.quicTicket(net)
        let tickets = try (0..<(3 * budget)).map { _ in try Self.quicTicket(net) }
        let accepted = try tickets.filter { try Self.quicWake(net, $0) }.count
        #expect(accepted < budget)
        #expect(try #require(context.antiReplayStore).count <= budget)
        #expect(try Self.quicWake(net, real), "a real client's ticket lost its 0-RTT to the flood")
    }

    @Test func oneTicketResumedOverAndOverOverQUICCarriesZeroRTTOnce() throws {
        let context = try Self.context(capacity: 8)
        let net = try VirtualNetwork(tls: context)
        net.installEcho()
        let real = try Self.quicTicket(net)
        let attacker = try Self.quicTicket(net)
        var accepted = 0
        for _ in 0..<30 where try Self.quicWake(net, attacker) { accepted += 1 }
        #expect(accepted == 1)
        #expect(try Self.quicWake(net, real), "a real client's 0-RTT was refused")
    }

    @Test func aTicketPastItsWindowResumesWithoutEarlyData() throws {
        let context = try Self.context(capacity: 4, windowMilliseconds: 60_000)
        let store = try #require(context.antiReplayStore)
        let issuedAt = Int64(time(nil))
        store.now = { issuedAt }
        let (early, late) = try (
            QMuxOverTLSTests.resumptionMaterial(context), QMuxOverTLSTests.resumptionMaterial(context)
        )
        store.now = { issuedAt + 59 }
        #expect(try Self.wake(context, ticket: early), "within its window")
        store.now = { issuedAt + 60 }
        #expect(!(try Self.wake(context, ticket: late)), "past its window: 1-RTT")
        #expect(store.counters.expired == 1)
    }

    @Test func theBudgetComesBackAsWindowsEnd() throws {
        let context = try Self.context(capacity: 2, windowMilliseconds: 60_000)
        let store = try #require(context.antiReplayStore)
        let start = Int64(time(nil))
        store.now = { start }
        _ = try (0..<4).map { _ in try QMuxOverTLSTests.resumptionMaterial(context) }
        let spent = try QMuxOverTLSTests.resumptionMaterial(context)
        #expect(!(try Self.wake(context, ticket: spent)), "issued over budget: no 0-RTT")
        store.now = { start + 61 }  // every entry's window ended
        let fresh = try QMuxOverTLSTests.resumptionMaterial(context)
        #expect(try Self.wake(context, ticket: fresh), "budget available again once the windows ended")
        #expect(store.count <= 2)
    }

    @Test func aClientHelloOfferingSeveralTicketsGetsNoEarlyData() throws {
        // RFC 8446 §4.2.10: early data only with the first identity; GnuTLS does not check which it selected.
        let hello = Self.clientHelloBody(identities: [
            [UInt8](repeating: 1, count: 20), [UInt8](repeating: 2, count: 20),
        ])
        let identities = hello.withUnsafeBytes { TicketKeySelection.pskIdentities(clientHello: $0) }
        #expect(identities?.count == 2)
        let antiReplay = try GnuTLSAntiReplay(store: AntiReplayStore(capacity: 4, windowSeconds: 60))
        hello.withUnsafeBytes { antiReplay.clientHelloArrived($0) }
        #expect(!antiReplay.hasPresentedTicket, "two identities: nothing to record, so no 0-RTT")
        let single = Self.clientHelloBody(identities: [[UInt8](repeating: 1, count: 20)])
        single.withUnsafeBytes { antiReplay.clientHelloArrived($0) }
        #expect(antiReplay.hasPresentedTicket)
    }

    @Test func theTicketIsReadFromANewSessionTicketAndMalformedOnesRecordNothing() throws {
        let ticket: [UInt8] = [7, 7, 7]
        let body: [UInt8] = [0, 0, 0x54, 0x60] + [1, 2, 3, 4] + [4, 9, 9, 9, 9] + [0, 3] + ticket + [0, 0]
        #expect(body.withUnsafeBytes { GnuTLSAntiReplay.ticket(newSessionTicket: $0) } == ticket)
        let antiReplay = try GnuTLSAntiReplay(store: AntiReplayStore(capacity: 4, windowSeconds: 60))
        for length in 0..<(body.count - 2) {
            let truncated = Array(body.prefix(length))
            #expect(truncated.withUnsafeBytes { GnuTLSAntiReplay.ticket(newSessionTicket: $0) } == nil)
            #expect(!truncated.withUnsafeBytes { antiReplay.ticketIssued(newSessionTicket: $0) })
        }
        #expect((antiReplay.store as? AntiReplayStore)?.count == 0)
    }

    // MARK: - Helpers

    /// A full QUIC handshake on `net`, kept until its ticket arrived: what the client saves.
    static func quicTicket(_ net: VirtualNetwork) throws -> ClientResumption {
        let index = net.clients.count
        let client = try net.addClient()
        #expect(net.run { net.clientHandshakeCompleted(client: index) })
        net.run(for: 200 * nanosecondsPerMillisecond)
        let saved = try #require(net.resumption(client: index))
        client.close(code: 0, reason: "", now: net.now)
        net.run(for: 100 * nanosecondsPerMillisecond)
        return saved
    }

    /// Over QUIC: whether a resumption of `saved` with an early message had its 0-RTT accepted.
    static func quicWake(_ net: VirtualNetwork, _ saved: ClientResumption) throws -> Bool {
        let index = net.clients.count
        let client = try net.addClient(resumption: saved)
        let stream = try #require(try client.openBidirectionalStream())
        try client.write(stream: stream, Array("wake".utf8), fin: true)
        #expect(net.run { net.clientStreamData(stream, client: index).fin }, "the wake was answered")
        client.close(code: 0, reason: "", now: net.now)
        net.run(for: 100 * nanosecondsPerMillisecond)
        return client.earlyDataAccepted == true
    }

    /// A minimal ClientHello body whose only extension is pre_shared_key with `identities`.
    static func clientHelloBody(identities: [[UInt8]]) -> [UInt8] {
        var list: [UInt8] = []
        for identity in identities { list += [0, UInt8(identity.count)] + identity + [0, 0, 0, 0] }
        let binders: [UInt8] = [0, 33, 32] + [UInt8](repeating: 0, count: 32)
        let psk = [UInt8(list.count >> 8), UInt8(list.count & 0xff)] + list + binders
        let extensions = [0, 41, UInt8(psk.count >> 8), UInt8(psk.count & 0xff)] + psk
        return [UInt8](repeating: 0, count: 34) + [0] + [0, 2, 0x13, 0x01] + [1, 0]
            + [UInt8(extensions.count >> 8), UInt8(extensions.count & 0xff)] + extensions
    }
}

/// The store at its real size: full, it holds its budget and no more, and refuses in O(1). Prints what an entry
/// costs (growth of the resident set) and the CPU time per call, the figures the README quotes (not asserted:
/// timing and memory figures vary by machine and run).
@Suite("0-RTT anti-replay store at full size")
struct AntiReplayStoreSizeTests {
    @Test func aFullStoreHoldsItsBudgetAndRefusesTheRest() {
        let capacity = 100_000
        let store = AntiReplayStore(capacity: capacity, windowSeconds: 6 * 3600)
        store.now = { 1_000_000 }
        let digests = (0..<(capacity + capacity / 2)).map { index in
            TicketDigest(digestBytes: (0..<16).map { UInt8(truncatingIfNeeded: index >> (8 * ($0 % 4)) &+ $0) })
        }
        let residentBefore = Self.residentBytes()
        let issueStart = Self.cpuSeconds()
        let recorded = digests.filter { store.issue($0) }.count
        let issueSeconds = Self.cpuSeconds() - issueStart
        let growth = Self.residentBytes() - residentBefore
        #expect(recorded == capacity)
        #expect(store.count == capacity)
        #expect(store.counters.overBudget == UInt64(capacity / 2))
        let redeemStart = Self.cpuSeconds()
        let accepted = digests.filter { store.redeem($0) }.count
        let redeemSeconds = Self.cpuSeconds() - redeemStart
        #expect(accepted == capacity, "every recorded ticket carries 0-RTT once, the others none")
        #expect(digests.allSatisfy { !store.redeem($0) }, "and never again")
        let issue = Self.microseconds(issueSeconds, digests.count)
        let redeem = Self.microseconds(redeemSeconds, digests.count)
        print(
            "anti-replay store, \(capacity) entries: resident set +\(growth / 1000) kB (\(growth / capacity) bytes per entry)"
        )
        print("anti-replay store: issue \(issue) µs CPU per call, redeem \(redeem) µs CPU per call")
    }

    static func residentBytes() -> Int {
        guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = statm.split(separator: " ")
        return fields.count > 1 ? (Int(fields[1]) ?? 0) * Int(sysconf(Int32(_SC_PAGESIZE))) : 0
    }

    static func cpuSeconds() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    static func microseconds(_ seconds: Double, _ calls: Int) -> String {
        String(format: "%.2f", seconds * 1e6 / Double(calls))
    }
}
