/// Rendezvous (highest-random-weight) hashing of a group over relays: every relay that sees the same live relays
/// computes the same order for a group, and a relay joining or leaving moves only the groups it ranks first.
/// The hash is FNV-1a over the group and relay names with a 64-bit finalizer: the same in every process and every
/// run (Swift's `Hasher` is seeded per process, so it cannot serve here).
public enum RendezvousOrder {
    /// `relays` ranked for `group`, the home first; ties (equal weights) fall to the smaller name.
    public static func rank(_ group: String, over relays: some Sequence<String>) -> [String] {
        relays.map { ($0, weight(group, $0)) }
            .sorted { $0.1 != $1.1 ? $0.1 > $1.1 : $0.0 < $1.0 }
            .map(\.0)
    }

    /// The home of `group` among `relays`, nil when there is none.
    public static func home(_ group: String, over relays: some Sequence<String>) -> String? {
        var best: (relay: String, weight: UInt64)?
        for relay in relays {
            let weight = weight(group, relay)
            if let current = best, current.weight > weight || (current.weight == weight && current.relay < relay) {
                continue
            }
            best = (relay, weight)
        }
        return best?.relay
    }

    /// The weight of `relay` for `group`.
    public static func weight(_ group: String, _ relay: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in group.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
        hash = (hash ^ 0xff) &* 0x0000_0100_0000_01b3  // a separator no UTF-8 string contains
        for byte in relay.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
        // splitmix64's finalizer: FNV's low bits alone spread poorly over short names.
        hash = (hash ^ (hash >> 30)) &* 0xbf58_476d_1ce4_e5b9
        hash = (hash ^ (hash >> 27)) &* 0x94d0_49bb_1331_11eb
        return hash ^ (hash >> 31)
    }
}
