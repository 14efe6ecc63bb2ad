import Testing

@testable import TransportCore

/// Client active migration, sans-IO on a virtual clock: the client probes a new local address, moves there once
/// the server answers, and the server follows without a new handshake; every precondition ngtcp2 0.12.1 would
/// refuse (or assert on) is a typed error that leaves the connection as it was.
@Suite("QUIC client migration on a virtual clock")
struct MigrationTests {
    static let newAddress = SocketAddress(host: "198.51.100.7", port: 40000)!

    /// A handshake-confirmed echo call that has the server's spare connection IDs.
    static func confirmedCall() throws -> VirtualNetwork {
        let net = try VirtualNetwork()
        net.installEcho()
        try net.addClient()
        #expect(net.run { net.client.isHandshakeConfirmed })
        net.run(for: 100 * nanosecondsPerMillisecond)  // NEW_CONNECTION_ID frames and their ACKs
        return net
    }

    /// Sends `count` datagrams 20 ms apart, running the network in between.
    static func talk(_ net: VirtualNetwork, count: Int, tag: UInt8) throws {
        for index in 0..<count {
            try net.client.sendDatagram([tag, UInt8(index)] + [UInt8](repeating: 0, count: 60))
            net.run(for: 20 * nanosecondsPerMillisecond)
        }
    }

    static func echoed(_ net: VirtualNetwork, tag: UInt8) -> Int {
        net.clientDatagrams().filter { $0.first == tag }.count
    }

    @Test func theConnectionMovesWithoutANewHandshake() throws {
        let net = try Self.confirmedCall()
        let oldLocal = net.client.currentLocal
        let stream = try #require(try net.client.openBidirectionalStream())
        try net.client.write(stream: stream, Array("before".utf8), fin: false)
        try net.client.startMigration(to: Self.newAddress, now: net.now)
        #expect(net.client.isMigrating)
        // Audio keeps going while the new path is validated and after the move.
        try Self.talk(net, count: 50, tag: 1)
        try net.client.write(stream: stream, Array(" after".utf8), fin: true)
        #expect(net.run { net.clientStreamData(stream).fin })
        #expect(net.client.takeMigrationOutcome() == MigrationOutcome(local: Self.newAddress, succeeded: true))
        #expect(!net.client.isMigrating)
        #expect(net.client.currentLocal == Self.newAddress && oldLocal != Self.newAddress)
        #expect(net.client.statistics.counters.migrations == 1)
        #expect(Self.echoed(net, tag: 1) == 50)
        #expect(net.clientStreamData(stream).bytes == Array("before after".utf8))
        // One server connection, one handshake, and the server now sends to the new address.
        #expect(net.serverConnections.count == 1)
        let serverEvents = net.serverEvents.values.flatMap { $0 }
        #expect(serverEvents.filter { if case .handshakeCompleted = $0 { true } else { false } }.count == 1)
        #expect(net.serverConnections[0].currentRemote == Self.newAddress)
    }

    @Test func anUnansweredPathLeavesTheConnectionWhereItWas() throws {
        let net = try Self.confirmedCall()
        let oldLocal = net.client.currentLocal
        net.unreachable = [Self.newAddress]
        try net.client.startMigration(to: Self.newAddress, now: net.now)
        try Self.talk(net, count: 100, tag: 2)
        // ngtcp2 gives up after its probes' timeouts (a few seconds with backoff); the call goes on meanwhile.
        #expect(net.run(for: 30 * nanosecondsPerSecond) { !net.client.isMigrating })
        #expect(net.client.takeMigrationOutcome() == MigrationOutcome(local: Self.newAddress, succeeded: false))
        #expect(net.client.currentLocal == oldLocal)
        #expect(net.client.statistics.counters.migrations == 0)
        #expect(Self.echoed(net, tag: 2) == 100)
        #expect(net.client.closeReason == nil)
        // The path works again: a second attempt succeeds.
        net.unreachable = []
        try net.client.startMigration(to: Self.newAddress, now: net.now)
        try Self.talk(net, count: 10, tag: 3)
        #expect(net.client.takeMigrationOutcome()?.succeeded == true)
    }

    @Test func beforeTheHandshakeIsConfirmedMigrationIsRefused() throws {
        let net = try VirtualNetwork()
        try net.addClient()
        #expect(throws: TransportError.self) { try net.client.startMigration(to: Self.newAddress, now: net.now) }
        do {
            try net.client.startMigration(to: Self.newAddress, now: net.now)
        } catch {
            #expect(error.code == .migrationNotReady, "\(error)")
        }
        #expect(!net.client.isMigrating)
        #expect(net.run { net.clientHandshakeCompleted() })  // the refused call did not disturb the handshake
    }

    @Test func aSecondMigrationWhileOneValidatesIsRefused() throws {
        let net = try Self.confirmedCall()
        try net.client.startMigration(to: Self.newAddress, now: net.now)
        let other = SocketAddress(host: "198.51.100.8", port: 40000)!
        #expect(
            Self.code { () throws(TransportError) in try net.client.startMigration(to: other, now: net.now) }
                == .migrationNotReady)
        try Self.talk(net, count: 10, tag: 4)
        #expect(net.client.takeMigrationOutcome() == MigrationOutcome(local: Self.newAddress, succeeded: true))
    }

    @Test func refusalsAreTypedAndHarmless() throws {
        let net = try Self.confirmedCall()
        // The current address again: ngtcp2 refuses it (INVALID_ARGUMENT).
        #expect(
            Self.code { () throws(TransportError) in
                try net.client.startMigration(to: net.client.currentLocal, now: net.now)
            }
                == .migrationUnsupported)
        // Another address family than the server's.
        let v6 = SocketAddress(host: "2001:db8::7", port: 40000)!
        #expect(
            Self.code { () throws(TransportError) in try net.client.startMigration(to: v6, now: net.now) }
                == .migrationUnsupported)
        // A server connection: ngtcp2 would assert; the core refuses first.
        let server = try #require(net.serverConnections.first)
        #expect(
            Self.code { () throws(TransportError) in try server.startMigration(to: Self.newAddress, now: net.now) }
                == .migrationUnsupported)
        try Self.talk(net, count: 5, tag: 5)
        #expect(Self.echoed(net, tag: 5) == 5)
    }

    @Test func runningOutOfSpareConnectionIDsIsTyped() throws {
        let net = try Self.confirmedCall()
        // Each successful move uses one of the server's spare IDs (3 with active_connection_id_limit 4); ngtcp2
        // refuses when none is left, and the server replenishes them as the client retires old ones.
        var moves = 0
        var refusal: TransportError.Code?
        for index in 0..<8 {
            let address = SocketAddress(host: "198.51.100.\(20 + index)", port: 40000)!
            do {
                try net.client.startMigration(to: address, now: net.now)
                try Self.talk(net, count: 1, tag: 6)
                if net.client.takeMigrationOutcome()?.succeeded == true { moves += 1 }
                // The relay takes the next change (to a new ID) only once ngtcp2 has settled this one
                // (PathChangeRules): its silent re-validation of the path left lasts up to 9 PTO (about 1 s here).
                net.run(for: 10 * nanosecondsPerSecond)
            } catch let error as TransportError {
                refusal = error.code
                break
            }
        }
        #expect(moves >= 3)
        #expect(refusal == nil || refusal == .migrationNotReady)
        #expect(net.client.closeReason == nil)
    }

    static func code(_ body: () throws(TransportError) -> Void) -> TransportError.Code? {
        do {
            try body()
            return nil
        } catch {
            return error.code
        }
    }
}
