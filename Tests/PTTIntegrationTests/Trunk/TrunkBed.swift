import Foundation
import PTTTransport
import TransportCore

@testable import PTTTalkGroups

/// Relays of one fleet in this process, each a `TalkGroupBed` on real loopback sockets with its trunk listener,
/// sharing a real redis-server and a fleet secret; their events recorded.
final class TrunkBed: Sendable {
    let redis: RedisTestServer
    /// The path every relay takes to the store, with `proxied` (nil: they connect to it directly).
    let proxy: RedisPathProxy?
    let relays: [TalkGroupBed]
    let events: [Locked<[TalkGroupEvent]>]
    static let secret = [UInt8](repeating: 0x5a, count: 32)

    /// `names.count` relays named `names`; `configure` adjusts each relay's configuration. `proxied`: the relays
    /// reach the store through a `RedisPathProxy` (`proxy`), which can slow, stall or cut their path.
    init(
        _ names: [String], floor: FloorControl? = nil, proxied: Bool = false,
        configure: @escaping @Sendable (inout TalkGroupRelay.Configuration) -> Void = { _ in }
    ) async throws {
        let redis = try await RedisTestServer.start()
        self.redis = redis
        let proxy = try proxied ? RedisPathProxy(upstream: redis.port) : nil
        self.proxy = proxy
        let storePort = proxy?.port ?? redis.port
        let prefix = "trunk-\(UUID().uuidString.prefix(8)):"
        var relays: [TalkGroupBed] = []
        var events: [Locked<[TalkGroupEvent]>] = []
        for name in names {
            let log = Locked<[TalkGroupEvent]>([])
            events.append(log)
            relays.append(
                try await TalkGroupBed(
                    configure: { configuration in
                        var fleet = FleetConfiguration(
                            store: RedisAntiReplayStore(host: "127.0.0.1", port: storePort), relayName: name,
                            trunkAddress: "")
                        fleet.keyPrefix = prefix
                        configuration.fleet = fleet
                        var trunk = TrunkConfiguration(
                            listen: "127.0.0.1:0", certificateChain: Fixtures.serverCert,
                            privateKey: Fixtures.serverKey, trust: .caFile(Fixtures.ca), secret: Self.secret)
                        trunk.serverName = "localhost"
                        trunk.proofDeadline = .milliseconds(500)
                        configuration.trunk = trunk
                        if let floor { configuration.floor = floor }
                        configure(&configuration)
                    },
                    events: { event in log.withLock { $0.append(event) } }))
        }
        self.relays = relays
        self.events = events
    }

    func shutdown() async {
        for relay in relays { await relay.shutdown() }
        proxy?.stop()
        redis.stop()
    }

    /// Waits until every relay has a trunk to every other one.
    func meshed(within limit: Duration = .seconds(20)) async -> Bool {
        let count = relays.count - 1
        return await eventually(within: limit) { self.relays.allSatisfy { $0.relay.trunkPeers.count == count } }
    }

    /// The relay that is `group`'s home (once one confirmed it), by index.
    func home(of group: String, within limit: Duration = .seconds(20)) async -> Int? {
        _ = await eventually(within: limit) {
            self.relays.filter { $0.relay.fleetRole(of: group) == .home }.count == 1
                && self.relays.allSatisfy { relay in
                    guard let role = relay.relay.fleetRole(of: group) else { return false }
                    if case .remote = role { return true }
                    return role == .home
                }
        }
        return relays.firstIndex { $0.relay.fleetRole(of: group) == .home }
    }

    /// The trunk events of relay `index`: (peer, state, reason).
    func trunkEvents(_ index: Int) -> [(peer: String, state: String, reason: String?)] {
        events[index].withLock { events in
            events.compactMap { event in
                if case .trunk(let peer, let state, let reason) = event { return (peer, state, reason) }
                return nil
            }
        }
    }
}
