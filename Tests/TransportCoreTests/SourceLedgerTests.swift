import Testing

@testable import TransportCore

/// The per-source budget on a virtual clock: live cap, token bucket, separate accounts for validated and
/// unvalidated addresses, what counts as one source, and that forgotten sources really are forgotten.
@Suite("Per-source connection budget (sans-IO)")
struct SourceLedgerTests {
    let second = nanosecondsPerSecond
    let t0: UInt64 = 1_000 * nanosecondsPerSecond

    private func address(_ host: String, port: UInt16 = 5000) -> SocketAddress {
        SocketAddress(host: host, port: port)!
    }

    private func charge(_ admission: SourceLedger.Admission) -> SourceLedger.Charge? {
        if case .admitted(let charge) = admission { return charge }
        return nil
    }

    private func refusal(_ admission: SourceLedger.Admission) -> SourceLedger.Refusal? {
        if case .refused(let refusal) = admission { return refusal }
        return nil
    }

    @Test func theBurstThenTheRate() {
        var ledger = SourceLedger(limits: SourceLimits(maxLive: 100, perSecond: 2, burst: 3))
        let source = address("198.51.100.7")
        for _ in 0..<3 { #expect(charge(ledger.admit(source, validated: false, now: t0)) != nil) }
        #expect(refusal(ledger.admit(source, validated: false, now: t0)) == .tooFast)
        #expect(refusal(ledger.admit(source, validated: false, now: t0 + second / 4)) == .tooFast)
        #expect(charge(ledger.admit(source, validated: false, now: t0 + second / 2)) != nil, "2/s: one per 500 ms")
        #expect(refusal(ledger.admit(source, validated: false, now: t0 + second / 2)) == .tooFast)
        // Never more than the burst, however long the source waited.
        let later = t0 + 3600 * second
        for _ in 0..<3 { #expect(charge(ledger.admit(source, validated: false, now: later)) != nil) }
        #expect(refusal(ledger.admit(source, validated: false, now: later)) == .tooFast)
    }

    @Test func theLiveCapAndReleasing() throws {
        var ledger = SourceLedger(limits: SourceLimits(maxLive: 2, perSecond: 1000, burst: 1000))
        let source = address("198.51.100.7")
        let first = try #require(charge(ledger.admit(source, validated: true, now: t0)))
        #expect(charge(ledger.admit(source, validated: true, now: t0)) != nil)
        #expect(refusal(ledger.admit(source, validated: true, now: t0)) == .tooManyLive)
        ledger.release(first, now: t0)
        #expect(charge(ledger.admit(source, validated: true, now: t0)) != nil)
    }

    @Test func validatedAndUnvalidatedAreSeparateAccounts() {
        var ledger = SourceLedger(limits: SourceLimits(maxLive: 1, perSecond: 1, burst: 1))
        let office = address("203.0.113.10")
        // Spoofed Initials use up the unvalidated account of the office's address ...
        #expect(charge(ledger.admit(office, validated: false, now: t0)) != nil)
        #expect(refusal(ledger.admit(office, validated: false, now: t0)) != nil)
        // ... but a phone that proved the address (Retry token) still gets in.
        #expect(charge(ledger.admit(office, validated: true, now: t0)) != nil)
        #expect(refusal(ledger.admit(office, validated: true, now: t0)) != nil)
    }

    @Test func whatCountsAsOneSource() {
        var ledger = SourceLedger(limits: SourceLimits(maxLive: 1, perSecond: 1, burst: 1))
        // Ports do not matter: one NAT, one source.
        #expect(charge(ledger.admit(address("192.0.2.1", port: 1), validated: false, now: t0)) != nil)
        #expect(refusal(ledger.admit(address("192.0.2.1", port: 2), validated: false, now: t0)) != nil)
        // An IPv4-mapped IPv6 address (dual-stack socket) is that IPv4 address.
        #expect(refusal(ledger.admit(address("::ffff:192.0.2.1"), validated: false, now: t0)) != nil)
        #expect(charge(ledger.admit(address("192.0.2.2"), validated: false, now: t0)) != nil)
        // IPv6: the /64 is the source (a host can pick any address in it).
        #expect(charge(ledger.admit(address("2001:db8:1:2::1"), validated: false, now: t0)) != nil)
        #expect(refusal(ledger.admit(address("2001:db8:1:2:ffff::9"), validated: false, now: t0)) != nil)
        #expect(charge(ledger.admit(address("2001:db8:1:3::1"), validated: false, now: t0)) != nil)
    }

    @Test func closingAndReopeningDoesNotResetTheRate() throws {
        var ledger = SourceLedger(limits: SourceLimits(maxLive: 100, perSecond: 1, burst: 2))
        let source = address("198.51.100.7")
        for _ in 0..<2 {
            let admitted = try #require(charge(ledger.admit(source, validated: false, now: t0)))
            ledger.release(admitted, now: t0)
        }
        #expect(refusal(ledger.admit(source, validated: false, now: t0 + second / 10)) == .tooFast)
    }

    @Test func idleSourcesAreForgottenOnceTheirBucketsAreFull() throws {
        let limits = SourceLimits(maxLive: 10, perSecond: 10, burst: 20)  // refills in 2 s
        var ledger = SourceLedger(limits: limits)
        var charges: [SourceLedger.Charge] = []
        for index in 0..<10_000 {
            let host = "10.\(index >> 16 & 255).\(index >> 8 & 255).\(index & 255)"
            charges.append(try #require(charge(ledger.admit(address(host), validated: false, now: t0))))
        }
        #expect(ledger.trackedSources == 10_000)
        for charge in charges { ledger.release(charge, now: t0 + second) }
        #expect(ledger.trackedSources > 9_000, "not yet refilled: still remembered")
        // Each later call forgets up to two refilled sources: O(1) per packet, and the table drains.
        let busy = address("192.0.2.99")
        let later = t0 + 4 * second
        for _ in 0..<5_001 {
            if let admitted = charge(ledger.admit(busy, validated: true, now: later)) {
                ledger.release(admitted, now: later)
            }
        }
        #expect(ledger.trackedSources <= 1, "only the busy source is left: \(ledger.trackedSources)")
    }
}
