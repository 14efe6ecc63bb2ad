import Testing

@testable import TransportCore

/// Key updates, sans-IO on a virtual clock: a client renews its packet keys mid-call without a new handshake and
/// the call goes on; the conditions under which ngtcp2 0.12.1 would assert or refuse are typed errors.
@Suite("QUIC key update on a virtual clock")
struct KeyUpdateTests {
    @Test func aCallContinuesAcrossKeyUpdates() throws {
        let net = try MigrationTests.confirmedCall()
        try MigrationTests.talk(net, count: 10, tag: 1)
        try net.client.initiateKeyUpdate(now: net.now)
        try MigrationTests.talk(net, count: 50, tag: 2)
        #expect(MigrationTests.echoed(net, tag: 2) == 50)
        // A second one, once the peer confirmed the first (a second of talk is many probe timeouts here).
        try net.client.initiateKeyUpdate(now: net.now)
        try MigrationTests.talk(net, count: 50, tag: 3)
        #expect(MigrationTests.echoed(net, tag: 3) == 50)
        #expect(net.client.statistics.counters.keyUpdates == 2)
        #expect(net.serverConnections.count == 1)
    }

    @Test func tooEarlyOrTooOftenIsATypedErrorAndTheCallStaysUp() throws {
        let net = try VirtualNetwork()
        net.installEcho()
        try net.addClient()
        // Before the handshake: ngtcp2 0.12.1 would assert here.
        do {
            try net.client.initiateKeyUpdate(now: net.now)
            Issue.record("a key update before the handshake was accepted")
        } catch {
            #expect(error.code == .keyUpdateNotReady, "\(error)")
        }
        #expect(net.run { net.client.isHandshakeConfirmed })
        net.run(for: 100 * nanosecondsPerMillisecond)
        try net.client.initiateKeyUpdate(now: net.now)
        do {
            try net.client.initiateKeyUpdate(now: net.now)
            Issue.record("a second key update before the first was confirmed was accepted")
        } catch {
            #expect(error.code == .keyUpdateNotReady, "\(error)")
        }
        try MigrationTests.talk(net, count: 20, tag: 4)
        #expect(MigrationTests.echoed(net, tag: 4) == 20)
        // Once closed: a typed error, not an assertion.
        net.client.close(code: 0, reason: "", now: net.now)
        #expect(throws: TransportError.self) { try net.client.initiateKeyUpdate(now: net.now) }
    }
}
