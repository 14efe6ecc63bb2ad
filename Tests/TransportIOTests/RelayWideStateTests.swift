internal import CTransportShims
import Foundation
import Glibc
import Testing
import TransportCore

@testable import TransportIO

/// The memory a relay's worker processes count in together (issue 31, item 10): two mappings of one region stand
/// for two workers (each maps the supervisor's memfd MAP_SHARED, as here). Limits hold over both; what a worker held
/// comes back when it is released; a holder that dies with the lock wedges no one.
@Suite("Relay-wide state shared by a relay's workers")
struct RelayWideStateTests {
    /// A region for `workers` workers and each worker's mapping of it (the descriptor is closed once mapped).
    static func region(
        workers: Int = 2, sources: Int = 1024, grants: Int = 10
    ) throws -> [RelayWideState] {
        let fd = try RelayWideState.create(.init(workers: workers, sources: sources, zeroRTTGrants: grants))
        defer { close(fd) }
        return try (0..<workers).map { try RelayWideState(descriptor: fd, worker: $0) }
    }

    static let limits = SourceLimits(maxLive: 3, perSecond: 1, burst: 100)
    static let source = SocketAddress(parsing: "192.0.2.7:4433")!

    @Test func connectionsAreCountedOverEveryWorkerAndADeadWorkersComeBack() throws {
        let workers = try Self.region()
        workers[0].addConnections(3)
        workers[1].addConnections(2)
        #expect(workers[0].connections == 5 && workers[1].connections == 5)
        workers[1].addConnections(-1)
        #expect(workers[0].connections == 4)
        workers[0].releaseWorker(0)  // the supervisor, after worker 0 died
        #expect(workers[1].connections == 1, "worker 0's three slots came back")
    }

    @Test func aSourcesLiveBudgetHoldsOverWorkersPerAccountAndLedger() throws {
        let workers = try Self.region()
        let quic = workers.map { RelayWideSourceAdmission(state: $0, ledger: .quic, limits: Self.limits) }
        let tcp = RelayWideSourceAdmission(state: workers[1], ledger: .tcp, limits: Self.limits)
        var charges: [SourceLedger.Charge] = []
        for worker in [0, 1, 0] {
            guard case .admitted(let charge) = quic[worker].admit(Self.source, validated: true, now: 1) else {
                Issue.record("within the budget of 3")
                return
            }
            charges.append(charge)
        }
        guard case .refused(.tooManyLive) = quic[1].admit(Self.source, validated: true, now: 1) else {
            Issue.record("a fourth live connection on another worker is over the source's budget")
            return
        }
        guard case .admitted = quic[1].admit(Self.source, validated: false, now: 1),
            case .admitted = tcp.admit(Self.source, validated: true, now: 1)
        else {
            Issue.record("the unvalidated account and the TCP ledger have budgets of their own")
            return
        }
        #expect(quic[0].live(from: Self.source, validated: true) == 3)
        quic[1].release(charges[1], now: 2)
        #expect(quic[0].live(from: Self.source, validated: true) == 2)
        guard case .admitted = quic[1].admit(Self.source, validated: true, now: 2) else {
            Issue.record("a released place is free again")
            return
        }
        workers[0].releaseWorker(0)
        #expect(quic[1].live(from: Self.source, validated: true) == 1, "worker 0's two connections came back")
        #expect(tcp.live(from: Self.source, validated: true) == 1, "worker 1's TCP connection stays")
    }

    @Test func aSourcesBucketIsOneForTheRelay() throws {
        let workers = try Self.region()
        let limits = SourceLimits(maxLive: 100, perSecond: 2, burst: 4)
        let quic = workers.map { RelayWideSourceAdmission(state: $0, ledger: .quic, limits: limits) }
        var admitted = 0
        for index in 0..<8 {
            if case .admitted = quic[index % 2].admit(Self.source, validated: false, now: 1_000) { admitted += 1 }
        }
        #expect(admitted == 4, "the burst of 4 is the source's, not each worker's")
        guard case .refused(.tooFast) = quic[0].admit(Self.source, validated: false, now: 1_000) else {
            Issue.record("an empty bucket refuses as too fast")
            return
        }
        guard case .admitted = quic[1].admit(Self.source, validated: false, now: 1_000 + 500_000_000) else {
            Issue.record("half a second at 2 per second refills one token")
            return
        }
    }

    @Test func pendingHandshakesPerSourceHoldOverWorkers() throws {
        let workers = try Self.region()
        let key = SourceLedger.Key(Self.source)
        var acquired = 0
        for index in 0..<100 where workers[index % 2].acquirePending(key, perSource: 64, now: 1) { acquired += 1 }
        #expect(acquired == 64, "64 per source for the relay, not 64 per worker")
        #expect(workers[0].pending(from: key) == 64)
        workers[1].releasePending(key, now: 2)
        #expect(workers[0].acquirePending(key, perSource: 64, now: 2))
        #expect(!workers[1].acquirePending(key, perSource: 64, now: 2))
        workers[0].releaseWorker(1)
        #expect(workers[0].pending(from: key) == 33, "worker 1's 31 came back")
        let other = SourceLedger.Key(SocketAddress(parsing: "[2001:db8:1:2::9]:1")!)
        #expect(workers[1].acquirePending(other, perSource: 64, now: 3), "another source has its own budget")
    }

    @Test func theZeroRTTBudgetSpansWorkersAndItsGrantsExpire() throws {
        let workers = try Self.region(grants: 10)
        let grants = workers.map { RelayWideZeroRTTGrants(state: $0, capacity: 10, windowMilliseconds: 1_000) }
        var taken = 0
        for index in 0..<30 where grants[index % 2].take(now: 5_000) { taken += 1 }
        #expect(taken == 10, "10 grants for the relay, not 10 per worker")
        #expect(!grants[0].take(now: 5_999))
        #expect(grants[1].take(now: 6_000), "the first grants leave the window after 1 s")
    }

    /// The fleet's store gives back the grant of a claim that created nothing (a replay, a store that lost its
    /// memory): on any worker, for the whole relay.
    @Test func aGrantGivenBackOnOneWorkerCanBeTakenOnAnother() throws {
        let workers = try Self.region(grants: 3)
        let grants = workers.map { RelayWideZeroRTTGrants(state: $0, capacity: 3, windowMilliseconds: 1_000) }
        for index in 0..<3 { #expect(grants[index % 2].take(now: 100)) }
        #expect(!grants[1].take(now: 100) && grants[0].used(now: 100) == 3)
        grants[0].giveBack()
        #expect(grants[1].used(now: 100) == 2, "given back for the relay, not only worker 0")
        #expect(grants[1].take(now: 100))
        for _ in 0..<5 { grants[1].giveBack() }
        #expect(grants[0].used(now: 100) == 0, "never below none")
    }

    /// The in-process anti-replay store of each worker records a ticket only with a grant from the relay's budget.
    @Test func inProcessStoresOfTwoWorkersShareTheTicketBudget() throws {
        let workers = try Self.region(grants: 4)
        let stores = workers.map { state in
            AntiReplayStore(
                capacity: 4, windowSeconds: 60,
                grants: { RelayWideZeroRTTGrants(state: state, capacity: $0, windowMilliseconds: $1) })
        }
        for store in stores { store.now = { 1_000 } }
        var recorded = 0
        for index in 0..<8 {
            let ticket = TicketDigest(digestBytes: [UInt8(index)] + [UInt8](repeating: 7, count: 15))
            if stores[index % 2].issue(ticket) { recorded += 1 }
        }
        #expect(recorded == 4, "a budget of 4 tickets with 0-RTT for the relay")
        #expect(stores[0].counters.overBudget + stores[1].counters.overBudget == 4)
    }

    @Test func sourcesThatHoldNothingLeaveOnceTheirBucketIsFull() throws {
        let workers = try Self.region(sources: 64)
        let quic = RelayWideSourceAdmission(state: workers[0], ledger: .quic, limits: Self.limits)
        for index in 0..<40 {
            let source = SocketAddress(parsing: "198.51.100.\(index):1")!
            guard case .admitted(let charge) = quic.admit(source, validated: true, now: 1) else {
                Issue.record("source \(index) admitted")
                return
            }
            quic.release(charge, now: 2)
        }
        #expect(quic.trackedSources == 40, "their buckets refill for 100 s")
        let later: UInt64 = 200 * 1_000_000_000
        for index in 0..<200 {  // the sweep looks at two slots per call
            _ = workers[1].acquirePending(SourceLedger.Key(Self.source), perSource: 1_000, now: later + UInt64(index))
        }
        #expect(quic.trackedSources == 1, "only the source still pending stays")
    }

    @Test func aFullTableRefusesNewSourcesAndKeepsServingKnownOnes() throws {
        let workers = try Self.region(sources: 32)  // 64 slots, three quarters usable
        let quic = RelayWideSourceAdmission(state: workers[0], ledger: .quic, limits: Self.limits)
        var admitted = 0
        for index in 0..<60 {
            if case .admitted = quic.admit(SocketAddress(parsing: "203.0.113.\(index):1")!, validated: true, now: 1) {
                admitted += 1
            }
        }
        #expect(admitted == 48)
        #expect(quic.trackedSources == 48)
        guard case .admitted = quic.admit(SocketAddress(parsing: "203.0.113.0:2")!, validated: true, now: 1) else {
            Issue.record("a known source is still served")
            return
        }
    }

    /// A holder of the lock that dies (a thread here; a worker process alike: the mutex is robust, and the kernel
    /// marks it for either) leaves it to the next caller, who repairs the table and goes on.
    @Test func aLockHolderThatDiesWedgesNoOne() throws {
        let fd = try RelayWideState.create(.init(workers: 2, sources: 1024, zeroRTTGrants: 10))
        defer { close(fd) }
        let state = try RelayWideState(descriptor: fd, worker: 1)
        let key = SourceLedger.Key(Self.source)
        #expect(state.acquirePending(key, perSource: 64, now: 1))
        var error: Int32 = 0
        let raw = try #require(ptt_relay_shared_map(fd, &error))
        defer { ptt_relay_shared_unmap(raw) }
        // nonisolated(unsafe) invariant: the mapping outlives the thread, which only takes the region's lock.
        nonisolated(unsafe) let region = raw
        let holder = Thread { _ = ptt_relay_shared_hold_lock(region) }  // ends holding the lock
        holder.start()
        let deadline = Date() + 10
        while !holder.isFinished && Date() < deadline { usleep(1_000) }
        #expect(holder.isFinished)
        #expect(state.acquirePending(key, perSource: 64, now: 2), "the next caller took the lock over")
        #expect(state.pending(from: key) == 2, "and the table survived the repair")
    }

    @Test func aDescriptorThatHoldsNoRegionIsATypedError() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("not-a-region-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let garbage = Data((0..<4096).map { _ in UInt8.random(in: 0...255) })
        #expect(FileManager.default.createFile(atPath: path, contents: garbage))
        let fd = open(path, O_RDWR)
        defer { close(fd) }
        #expect(throws: TransportError.self) { try RelayWideState(descriptor: fd, worker: 0) }
        #expect(throws: TransportError.self) { try RelayWideState(descriptor: 987_654, worker: 0) }
        let real = try RelayWideState.create(.init(workers: 2, sources: 64, zeroRTTGrants: 1))
        defer { close(real) }
        #expect(throws: TransportError.self) { try RelayWideState(descriptor: real, worker: 2) }
        #expect(throws: TransportError.self) {
            try RelayWideState.create(.init(workers: 65, sources: 64, zeroRTTGrants: 1))
        }
    }
}
