import ChildProcesses
import Foundation
import PTTTransport
import TestSupport
import Testing
import TransportCore
import TransportIO

@testable import PTTTalkGroups

/// Relays' presence in a real `redis-server`: liveness with expiry, one home per group, a dead relay's groups
/// re-homed, members written with their relay, and a store that is unreachable or answers garbage costing typed
/// errors and no grant, never the relay.
@Suite("Fleet presence in Redis", .integration)
struct FleetPresenceTests {
    /// A presence named `name` on a loop of its own.
    final class Member: Sendable {
        let loop: EventLoop
        let presence: FleetPresence
        let changes = Locked<[FleetElection.Change]>([])

        init(_ name: String, port: UInt16, serverID: [UInt8]? = nil) throws {
            loop = try EventLoop(name: "fleet-\(name)")
            var configuration = FleetConfiguration(
                store: RedisAntiReplayStore(host: "127.0.0.1", port: port), relayName: name,
                trunkAddress: "127.0.0.1:\(4000 + name.count)")
            configuration.keyPrefix = "test-fleet:"
            let changes = changes
            presence = FleetPresence(
                configuration: configuration, loop: loop, serverID: serverID,
                onChange: { new, _ in changes.withLock { $0 += new } })
            presence.start(addressBook: RedisAddressBook(host: "127.0.0.1", port: port))
        }

        deinit {
            presence.stop()
            loop.shutdown()
        }
    }

    /// Waits (up to `seconds`) until `condition` holds; returns how long that took, nil if it never did. The
    /// condition is read once more after the deadline: a test task starved past it has still not seen a "never".
    static func wait(seconds: Int = 10, until condition: () -> Bool) async -> Duration? {
        let clock = ContinuousClock()
        let start = clock.now
        while clock.now < start.advanced(by: .seconds(seconds)) {
            if condition() { return clock.now - start }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return condition() ? clock.now - start : nil
    }

    static let groups = (0..<12).map { "fleet-group-\($0)" }

    @Test func twoRelaysAgreeOnOneHomePerGroupAndADeadOnesGroupsMove() async throws {
        let redis = try await RedisTestServer.start()
        let a = try Member("relay-a", port: redis.port)
        var b: Member? = try Member("relay-b", port: redis.port)
        for group in Self.groups {
            _ = a.presence.follow(group)
            _ = b!.presence.follow(group)
        }
        let agreed = await Self.wait {
            Self.groups.allSatisfy { group in
                let roles = [a.presence.role(of: group), b!.presence.role(of: group)]
                return roles.filter { $0 == .home }.count == 1
                    && (roles.contains(.remote("relay-a")) || roles.contains(.remote("relay-b")))
            }
        }
        #expect(agreed != nil, "each group has one home, the other relay forwards to it")
        #expect(a.presence.live == ["relay-a", "relay-b"])
        let homedAtB = Self.groups.filter { b!.presence.role(of: $0) == .home }
        #expect(!homedAtB.isEmpty && homedAtB.count < Self.groups.count, "rendezvous spreads 12 groups: \(homedAtB)")
        // relay-b dies without deregistering (its loop stops: no more heartbeats).
        b!.loop.shutdown()
        b = nil
        let moved = await Self.wait { homedAtB.allSatisfy { a.presence.role(of: $0) == .home } }
        print("measure: groups of a relay that stopped heartbeating re-homed after \(moved.map { "\($0)" } ?? "never")")
        #expect(moved != nil)
        #expect(a.presence.live == ["relay-a"])
        let released = a.changes.withLock { $0 }.filter { homedAtB.contains($0.group) && $0.to == .home }
        #expect(released.count == homedAtB.count && released.allSatisfy(\.releasesFloor))
        #expect(a.presence.statistics.heartbeats > 0)
    }

    @Test func membersAreWrittenWithTheirRelayAndServerIDAndExpire() async throws {
        let redis = try await RedisTestServer.start()
        let a = try Member("relay-a", port: redis.port, serverID: [0x0a, 0x0b])
        let alice = try MemberIdentity("alice")
        a.presence.record(alice, group: "g", presence: .connected)
        let written = await Self.wait {
            (try? redis.command(["GET", "test-fleet:member:alice"]))
                == .bulk(Array("relay=relay-a sid=0a0b group=g presence=connected".utf8))
        }
        #expect(written != nil)
        guard case .integer(let ttl) = try redis.command(["PTTL", "test-fleet:member:alice"]) else {
            Issue.record("no PTTL")
            return
        }
        #expect(ttl > 0 && ttl <= 30_000, "the entry expires")
        a.presence.record(alice, group: "g", presence: nil)
        #expect(await Self.wait { (try? redis.command(["EXISTS", "test-fleet:member:alice"])) == .integer(0) } != nil)
    }

    @Test func aMembersWakeAddressIsWrittenWithItsPresenceAndBounded() async throws {
        let redis = try await RedisTestServer.start()
        let a = try Member("relay-a", port: redis.port)
        let bob = try MemberIdentity("bob")
        a.presence.record(bob, group: "g", presence: .suspended, wake: try WakeAddress(platform: .fcm, token: "b0b"))
        #expect(
            await Self.wait {
                (try? redis.command(["GET", "test-fleet:member:bob"]))
                    == .bulk(Array("relay=relay-a sid= group=g presence=suspended wake=fcm:b0b".utf8))
            } != nil)
        // The largest token a relay admits makes an entry of about 1 KiB; a larger one never gets this far.
        let largest = String(repeating: "t", count: WakeAddress.maximumTokenSize)
        a.presence.record(bob, group: "g", presence: .suspended, wake: try WakeAddress(platform: .apns, token: largest))
        #expect(
            await Self.wait {
                guard case .bulk(let value?) = try? redis.command(["GET", "test-fleet:member:bob"]) else {
                    return false
                }
                return value.count <= 1024 && String(decoding: value, as: UTF8.self).hasSuffix("wake=apns:" + largest)
            } != nil)
        #expect(throws: TransportError.self) { try WakeAddress(platform: .apns, token: largest + "t") }
        #expect(throws: TransportError.self) { try WakeAddress(platform: .apns, token: "two words") }
    }

    @Test func anUnreachableStoreGivesTypedErrorsAndNoHome() async throws {
        let port = try await StablePort.first(attempts: 20) { port in port }  // nothing listens there
        let a = try Member("relay-a", port: port)
        _ = a.presence.follow("g")
        #expect(await Self.wait { a.presence.statistics.failures >= 3 } != nil, "\(a.presence.statistics)")
        #expect(a.presence.statistics.lastError?.code == .unreachable)
        #expect(a.presence.role(of: "g") == .unknown, "never a view: grants nothing")
    }

    /// The store answers garbage or errors: counted as `fleetStoreUnusable` (or the pipeline's reconnects), the
    /// home lapses to `unconfirmed` within its lease, and comes back when the store does.
    @Test(arguments: [RedisPathProxy.Mode.garbage, .errorReply("-ERR unknown command 'EVAL'"), .endlessReply])
    func aHostileStoreStopsGrantsAndNotTheRelay(_ mode: RedisPathProxy.Mode) async throws {
        let redis = try await RedisTestServer.start()
        let proxy = try RedisPathProxy(upstream: redis.port)
        defer { proxy.stop() }
        let a = try Member("relay-a", port: proxy.port)
        _ = a.presence.follow("g")
        #expect(await Self.wait { a.presence.role(of: "g") == .home } != nil)
        proxy.setMode(mode)
        proxy.dropConnections()
        #expect(await Self.wait { a.presence.role(of: "g") == .unconfirmed } != nil)
        // The role reads unconfirmed as soon as the lease passed; the change is reported by the loop's deadline
        // timer, a moment later on a loaded machine.
        #expect(
            await Self.wait {
                a.changes.withLock { $0 }.contains { $0.from == .home && $0.to == .unconfirmed && $0.releasesFloor }
            } != nil)
        let error = try #require(a.presence.statistics.lastError)
        #expect([.fleetStoreUnusable, .unreachable, .handshakeTimeout].contains(error.code), "\(error)")
        if case .errorReply = mode { #expect(error.code == .fleetStoreUnusable, "\(error)") }
        proxy.setMode(.forward)
        proxy.dropConnections()
        #expect(await Self.wait { a.presence.role(of: "g") == .home } != nil, "home again a lifetime after")
    }

    @Test func aConfigurationWithBadNamesOrTimesIsRefused() throws {
        let store = RedisAntiReplayStore(host: "127.0.0.1")
        for name in ["", "a b", String(repeating: "r", count: 65), "caf\u{e9}", "tab\there"] {
            #expect(throws: TransportError.self, "\(name)") {
                try FleetConfiguration(store: store, relayName: name, trunkAddress: "").validate()
            }
        }
        var configuration = FleetConfiguration(store: store, relayName: "relay-a", trunkAddress: "")
        try configuration.validate()
        configuration.lifetime = .milliseconds(300)
        #expect(throws: TransportError.self) { try configuration.validate() }
        configuration.heartbeat = .milliseconds(1)
        #expect(throws: TransportError.self) { try configuration.validate() }
    }

    @Test func aHeartbeatAnswerThatIsNotAViewIsRefused() throws {
        let bad: [RESPValue] = [
            .integer(1), .array(nil), .array([]), .array([.integer(2)]), .array([.integer(1), .bulk(Array("a".utf8))]),
            .array([.integer(1), .bulk(Array("a b".utf8)), .bulk([])]), .array([.bulk([]), .bulk([]), .bulk([])]),
            .array([.integer(0), .bulk(nil), .bulk([])]), .array([.integer(0), .bulk([0xff]), .bulk([])]),
            .array([.integer(0), .bulk(Array(repeating: 0x61, count: 65)), .bulk([])]), .error("ERR"),
        ]
        for reply in bad {
            #expect(throws: TransportError.self, "\(reply)") { try FleetView(reply) }
        }
        let good = try FleetView(.array([.integer(1), .bulk(Array("r1".utf8)), .bulk(Array("10.0.0.1:4500".utf8))]))
        #expect(good == FleetView(registered: true, relays: [("r1", "10.0.0.1:4500")]))
    }
}
