/// Whom a group's home hands its wake hook when a burst starts, from its own members and the fleet's store. Sans-IO.
///
/// - This relay knows its own members best (the store holds what it wrote, maybe a write behind): a member of the
///   group here that is not connected, with a wake address, is woken — unless the store says it is on another
///   relay now (it moved: the relay it joined last owns its entry).
/// - The store tells of the others: a member of the group whose entry names another relay, not connected there,
///   with a wake address, is woken once (one entry per user), with that relay's name as `WakeTarget.lastRelay`.
/// - Nobody connected here, and never the talker.
///
/// Without the store's answer (`store` nil: unreachable, too slow, unusable, no list cached) only this relay's members
/// are woken. Members in `excluding` (handed to the hook already for this burst) are not named again.
enum FleetWake {
    /// `local`: this relay's members of the group to wake (`MemberRoster.toWake(in:)`); `connectedHere`: its members
    /// of the group connected now; `store`: the group's entries in the fleet's store (nil: no answer); `excluding`:
    /// the members this burst's earlier request named.
    static func targets(
        talker: MemberIdentity, me: String, local: [(identity: MemberIdentity, address: WakeAddress)],
        connectedHere: Set<MemberIdentity>, group: String, store: [FleetMembers.Entry]?,
        excluding: Set<MemberIdentity> = []
    ) -> [WakeTarget] {
        var elsewhere: [MemberIdentity: FleetMembers.Entry] = [:]
        for entry in store ?? [] where entry.relay != me { elsewhere[entry.user] = entry }
        var targets: [WakeTarget] = []
        var named = connectedHere.union(excluding)
        for member in local where member.identity != talker && elsewhere[member.identity] == nil {
            guard !named.contains(member.identity) else { continue }
            targets.append(WakeTarget(identity: member.identity, address: member.address))
            named.insert(member.identity)
        }
        for entry in elsewhere.values where entry.group == group && !named.contains(entry.user) {
            guard entry.presence != .connected, entry.user != talker, let address = entry.wake else { continue }
            targets.append(WakeTarget(identity: entry.user, address: address, lastRelay: entry.relay))
        }
        return targets.sorted { $0.identity < $1.identity }
    }
}
