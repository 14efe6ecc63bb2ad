import PTTTransport
import TransportCore

/// Who belongs to which group on a relay, where each member is (`MemberPresence`), since when, and how to wake it:
/// users, not connections. A user is in one group at a time (as on iOS's PushToTalk, one channel at a time) and has
/// at most one connection: its next join replaces the one before. Sans-IO: times are passed in (monotonic
/// nanoseconds), so tests drive it with a virtual clock; `TalkGroupRelay` runs it under a lock.
package struct MemberRoster {
    /// A member's record.
    package struct Member: Equatable, Sendable {
        package let identity: MemberIdentity
        package var group: String
        package var wakeAddress: WakeAddress?
        package var presence: MemberPresence
        /// When `presence` (or the wake address) last changed.
        package var since: UInt64
        /// Its connection while `presence` is `.connected`.
        package var connection: TransportConnection.ID?
        /// Whether it may ask for the floor, as it joined.
        package var role = FloorRole.transmitAndReceive
    }

    /// What a join did besides adding the member.
    package struct Joined: Equatable {
        /// The user's earlier connection, replaced: take it out of its channel and close it.
        package var replaced: TransportConnection.ID?
        /// The group it was in before, when it moved.
        package var movedFrom: String?
    }

    /// How long a member that is not connected stays a member, in nanoseconds.
    package let lifetime: UInt64
    /// The most members one group may have.
    package let maximumPerGroup: Int
    private var members: [MemberIdentity: Member] = [:]
    private var groups: [String: Set<MemberIdentity>] = [:]

    package init(lifetime: UInt64, maximumPerGroup: Int) {
        self.lifetime = lifetime
        self.maximumPerGroup = max(1, maximumPerGroup)
    }

    /// `user` joined `group` on `connection` in `role` at `now`: it is connected there, with `wakeAddress`.
    ///
    /// - Throws: `noResources` when the group is full.
    package mutating func join(
        _ user: MemberIdentity, group: String, wakeAddress: WakeAddress?, connection: TransportConnection.ID,
        role: FloorRole = .transmitAndReceive, now: UInt64
    ) throws(TransportError) -> Joined {
        var joined = Joined()
        if let existing = members[user] {
            if existing.connection != connection { joined.replaced = existing.connection }
            if existing.group != group {
                guard (groups[group]?.count ?? 0) < maximumPerGroup else { throw full(group) }
                joined.movedFrom = existing.group
                remove(user, from: existing.group)
            }
        } else {
            guard (groups[group]?.count ?? 0) < maximumPerGroup else { throw full(group) }
        }
        members[user] = Member(
            identity: user, group: group, wakeAddress: wakeAddress, presence: .connected, since: now,
            connection: connection, role: role)
        groups[group, default: []].insert(user)
        return joined
    }

    /// `connection` of `user` ended at `now`: cleanly (the phone closed with code 0: suspended) or not
    /// (unreachable). Nothing changes when `connection` is no longer the user's (it was replaced). Returns the new
    /// presence when it changed.
    @discardableResult
    package mutating func disconnected(
        _ user: MemberIdentity, connection: TransportConnection.ID, clean: Bool, now: UInt64
    ) -> MemberPresence? {
        guard var member = members[user], member.connection == connection else { return nil }
        member.connection = nil
        member.presence = clean ? .suspended : .unreachable
        member.since = now
        members[user] = member
        return member.presence
    }

    /// The push gateway could not deliver to `user`'s wake address (the token is dead): the member is unreachable
    /// and its address dropped until it joins again. Nothing happens while it is connected.
    @discardableResult
    package mutating func undeliverable(_ user: MemberIdentity, now: UInt64) -> Bool {
        guard var member = members[user], member.presence != .connected else { return false }
        member.presence = .unreachable
        member.wakeAddress = nil
        member.since = now
        members[user] = member
        return true
    }

    /// `user` leaves `group`; returns its record (nil: it was not a member there).
    @discardableResult
    package mutating func leave(_ user: MemberIdentity, group: String) -> Member? {
        guard let member = members[user], member.group == group else { return nil }
        remove(user, from: group)
        members[user] = nil
        return member
    }

    /// Members not connected whose last change is older than `lifetime` at `now` stop being members; returns them.
    package mutating func expire(now: UInt64) -> [Member] {
        let gone = members.values.filter { $0.presence != .connected && now &- $0.since >= lifetime }
        for member in gone {
            remove(member.identity, from: member.group)
            members[member.identity] = nil
        }
        return gone
    }

    /// The record of `user`.
    package func member(_ user: MemberIdentity) -> Member? { members[user] }

    /// The members of `group`, by identity.
    package func members(of group: String) -> [Member] {
        (groups[group] ?? []).compactMap { members[$0] }.sorted { $0.identity < $1.identity }
    }

    /// The members of `group` to wake for a burst: not connected and with a wake address.
    package func toWake(in group: String) -> [(identity: MemberIdentity, address: WakeAddress)] {
        guard let users = groups[group] else { return [] }
        var out: [(identity: MemberIdentity, address: WakeAddress)] = []
        out.reserveCapacity(users.count)
        for user in users {
            guard let member = members[user], member.presence != .connected, let address = member.wakeAddress
            else { continue }
            out.append((user, address))
        }
        return out
    }

    /// The members of `group` connected now.
    package func connected(in group: String) -> Set<MemberIdentity> {
        (groups[group] ?? []).filter { members[$0]?.presence == .connected }
    }

    /// How many members the relay holds.
    package var count: Int { members.count }

    private mutating func remove(_ user: MemberIdentity, from group: String) {
        groups[group]?.remove(user)
        if groups[group]?.isEmpty == true { groups[group] = nil }
    }

    private func full(_ group: String) -> TransportError {
        TransportError(.noResources, "group \(group) has its maximum of \(maximumPerGroup) members")
    }
}
