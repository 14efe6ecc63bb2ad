import TransportCore

/// The members of the fleet's store, sans-IO: the commands a relay sends (a member's write, a group's read) and the
/// strict parse of what the store answers. Each member has one entry, `PREFIX member:USER` →
/// `relay=NAME sid=HEX group=GROUP presence=PRESENCE[ wake=PLATFORM:TOKEN]`, written by the relay it is on; each
/// group an index `PREFIX group:GROUP`, a sorted set of its users scored by when their entries expire (the store's
/// clock), so the group's home reads every member of the group across the fleet in one round trip.
enum FleetMembers {
    /// The most members one read lists (a group's first by expiry; the relays' own limit per group is 10,000 by
    /// default).
    static let maximumListed = 10_000

    /// The most bytes one read's reply may take: each entry is at most about 900 bytes (a 64-byte user, names of
    /// 64, a 512-byte token) and its framing.
    static let maximumReplyBytes = maximumListed * 1_024

    /// Writes `value` for `user` (nil: deletes it), unless the entry belongs to another relay and this write does
    /// not say the member is connected here: the relay a member joined last owns its entry, so a relay still
    /// holding it as suspended (it moved) cannot overwrite where it is now. Returns 1 when written, 0 when another
    /// relay owns the entry.
    static func write(
        prefix: String, relay: String, user: MemberIdentity, group: String, value: String?, connected: Bool,
        lifetimeMilliseconds: Int64
    ) -> [String] {
        [
            "EVAL", writeScript, "2", prefix + "member:" + user.user, prefix + "group:" + group, relay, value ?? "",
            String(lifetimeMilliseconds), user.user, connected ? "1" : "0",
        ]
    }

    static let writeScript = """
        local current = redis.call('GET', KEYS[1])
        if current and ARGV[5] ~= '1' and string.match(current, '^relay=(%S+)') ~= ARGV[1] then return 0 end
        if ARGV[2] == '' then
          redis.call('DEL', KEYS[1])
          redis.call('ZREM', KEYS[2], ARGV[4])
          return 1
        end
        redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        redis.call('ZADD', KEYS[2], now + tonumber(ARGV[3]), ARGV[4])
        redis.call('PEXPIRE', KEYS[2], ARGV[3])
        return 1
        """

    /// Reads the members of `group`: drops the index's expired users (by the store's clock) and returns
    /// {user1, entry1, user2, entry2, ...}, an empty entry for a user whose entry is gone.
    static func read(prefix: String, group: String) -> [String] {
        ["EVAL", readScript, "1", prefix + "group:" + group, prefix + "member:", String(maximumListed)]
    }

    static let readScript = """
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
        local out = {}
        for _, user in ipairs(redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[2]) - 1)) do
          out[#out + 1] = user
          out[#out + 1] = redis.call('GET', ARGV[1] .. user) or ''
        end
        return out
        """

    /// One member's entry as the store holds it.
    struct Entry: Equatable, Sendable {
        var user: MemberIdentity
        /// The fleet name of the relay it is on.
        var relay: String
        var group: String
        var presence: MemberPresence
        var wake: WakeAddress?
    }

    /// The value of an entry.
    static func value(
        relay: String, serverID: String, group: String, presence: MemberPresence, wake: WakeAddress?
    ) -> String {
        "relay=\(relay) sid=\(serverID) group=\(group) presence=\(presence)"
            + (wake.map { " wake=\($0.platform):\($0.token)" } ?? "")
    }

    /// Parses a read's reply: the entries of users whose entry exists (an expired one is skipped).
    ///
    /// - Throws: `fleetStoreUnusable` for anything but an array of user and entry pairs, or an entry that is not
    ///   one a relay writes.
    static func entries(_ reply: RESPValue) throws(TransportError) -> [Entry] {
        guard case .array(let items?) = reply, items.count % 2 == 0, items.count <= 2 * maximumListed else {
            throw FleetView.unusable(
                "a group's members are not {user, entry, ...}: \(String(describing: reply).prefix(200))")
        }
        var entries: [Entry] = []
        entries.reserveCapacity(items.count / 2)
        var index = 0
        while index < items.count {
            guard case .bulk(let userBytes?) = items[index], case .bulk(let value?) = items[index + 1],
                let name = String(validating: userBytes, as: UTF8.self)
            else { throw FleetView.unusable("a group's member is not a user and an entry") }
            index += 2
            if value.isEmpty { continue }  // expired between the index and the entry
            let user: MemberIdentity
            do throws(TransportError) {
                user = try MemberIdentity(name)
            } catch {
                throw FleetView.unusable("a group's member \(name.prefix(80)) is no user identity")
            }
            guard let entry = entry(user, value) else {
                throw FleetView.unusable(
                    "the store's entry of \(name) is not one a relay writes: \(String(decoding: value.prefix(200), as: UTF8.self))"
                )
            }
            entries.append(entry)
        }
        return entries
    }

    /// Parses one entry's value.
    static func entry(_ user: MemberIdentity, _ value: String) -> Entry? { entry(user, Array(value.utf8)) }

    /// Parses one entry's bytes (one pass, no intermediate strings: a group's home parses thousands per burst): the
    /// relay and server ID are its first words, the presence and the wake address its last (neither holds a space),
    /// the group everything between (a group name may hold spaces).
    static func entry(_ user: MemberIdentity, _ value: [UInt8]) -> Entry? {
        let space = UInt8(ascii: " ")
        guard value.count <= 2_048, let first = value.firstIndex(of: space),
            let second = value[(first + 1)...].firstIndex(of: space), var last = value.lastIndex(of: space),
            last > second, value.starts(with: Self.relayTag), value[(first + 1)...].starts(with: Self.serverIDTag),
            value[(second + 1)...].starts(with: Self.groupTag)
        else { return nil }
        let relay = String(decoding: value[Self.relayTag.count..<first], as: UTF8.self)
        guard FleetView.isName(relay) else { return nil }
        var wake: WakeAddress?
        if value[(last + 1)...].starts(with: Self.wakeTag) {
            let address = value[(last + 1 + Self.wakeTag.count)...]
            guard let colon = address.firstIndex(of: UInt8(ascii: ":")),
                let platform = WakeAddress.Platform.allCases.first(where: {
                    address[..<colon].elementsEqual($0.description.utf8)
                }),
                let parsed = try? WakeAddress(
                    platform: platform, token: String(decoding: address[(colon + 1)...], as: UTF8.self))
            else { return nil }
            wake = parsed
            guard let before = value[..<last].lastIndex(of: space), before > second else { return nil }
            last = before
        }
        let end = wake == nil ? value.endIndex : value[(last + 1)...].firstIndex(of: space) ?? value.endIndex
        guard value[(last + 1)..<end].starts(with: Self.presenceTag),
            let presence = MemberPresence(
                rawValue: String(decoding: value[(last + 1 + Self.presenceTag.count)..<end], as: UTF8.self))
        else { return nil }
        let groupBytes = value[(second + 1 + Self.groupTag.count)..<last]
        guard !groupBytes.isEmpty, groupBytes.count <= TalkGroupMessage.maximumGroupSize,
            let group = String(validating: groupBytes, as: UTF8.self)
        else { return nil }
        return Entry(user: user, relay: relay, group: group, presence: presence, wake: wake)
    }

    private static let relayTag = Array("relay=".utf8)
    private static let serverIDTag = Array("sid=".utf8)
    private static let groupTag = Array("group=".utf8)
    private static let presenceTag = Array("presence=".utf8)
    private static let wakeTag = Array("wake=".utf8)
}
