import PTTTransport
import TransportCore

/// How a `TalkGroupRelay` takes part in a fleet whose groups span relays (see the article *Groups across a fleet*):
/// where the fleet's store is, this relay's name in it, and how often it proves it is alive.
public struct FleetConfiguration: Sendable {
    /// The fleet's store: a Redis (or Valkey), the one `--anti-replay` names or another (`host`, `port` and
    /// `database` are used; keys start with `keyPrefix` below, not the anti-replay prefix).
    public var store: RedisAntiReplayStore
    /// This relay's name in the fleet: unique, kept across restarts (it orders the groups' homes).
    public var relayName: String
    /// Where other relays reach this one's trunk listener (`host:port`), published with its liveness.
    public var trunkAddress: String
    /// How often the relay renews its liveness in the store (default 150 ms).
    public var heartbeat: Duration
    /// How long the store keeps the relay live after a heartbeat (default 600 ms): a dead home is replaced about
    /// this long after its last heartbeat, and a relay whose store stops answering stops granting this long after
    /// its last answered heartbeat was sent.
    public var lifetime: Duration
    /// How long the store keeps a member → relay entry after its last write (default 30 s; renewed every third).
    public var memberLifetime: Duration
    /// How long a group's home waits for the store's list of the group's members when a burst starts (default
    /// 200 ms): past it, or with the store unreachable, the wake hook is handed at once the group's last list the
    /// store gave within `memberLifetime` (`FleetStatistics.memberReadsCached`), else this relay's own members
    /// (both counted in `FleetStatistics.memberReadsFailed`). The loop never waits for it.
    public var memberReadDeadline: Duration
    /// How long after a burst starts the store's answer to that read is still used (default 3 s): an answer past
    /// `memberReadDeadline` and within this hands the hook, in a second `WakeRequest` of the same burst
    /// (`WakeRequest/isLateAddition`), the members not handed to it yet (`FleetStatistics.memberReadsLate`). A push
    /// takes 0.8–2 s and the burst buffer holds the burst, so a member woken late still hears it all. At or below
    /// `memberReadDeadline`: no late additions.
    public var lateMemberReadDeadline: Duration
    /// Prepended to every key ("ptt-fleet:" by default).
    public var keyPrefix: String

    /// A fleet on `store`, this relay named `relayName` with its trunk at `trunkAddress`; the other parameters
    /// have the defaults described on their properties.
    public init(store: RedisAntiReplayStore, relayName: String, trunkAddress: String) {
        self.store = store
        self.relayName = relayName
        self.trunkAddress = trunkAddress
        heartbeat = .milliseconds(150)
        lifetime = .milliseconds(600)
        memberLifetime = .seconds(30)
        memberReadDeadline = .milliseconds(200)
        lateMemberReadDeadline = .seconds(3)
        keyPrefix = "ptt-fleet:"
    }

    /// Checks the names and times.
    ///
    /// - Throws: `invalidConfiguration` for an empty or unprintable relay name (or one longer than 64 bytes), a
    ///   lifetime not above twice the heartbeat, or a heartbeat under 10 ms.
    public func validate() throws(TransportError) {
        guard FleetView.isName(relayName) else {
            throw TransportError(
                .invalidConfiguration, "a relay's fleet name is 1 to 64 printable ASCII characters, not \(relayName)")
        }
        guard heartbeat >= .milliseconds(10), lifetime > heartbeat * 2 else {
            throw TransportError(
                .invalidConfiguration,
                "the fleet lifetime (\(lifetime)) must exceed twice the heartbeat (\(heartbeat)), itself ≥ 10 ms")
        }
    }
}

extension TransportError.Code {
    /// The fleet's store answered a heartbeat or a member write with what is not a valid answer (another program on
    /// its port, a script error, a relay name it should not hold). The relay counts it, treats it as no answer and
    /// goes on; fix the store.
    public static let fleetStoreUnusable = TransportError.Code("fleet-store-unusable")
}
