import TransportCore

/// One answer of the fleet's store to a heartbeat: the live relays with their trunk addresses, and whether this
/// relay's entry was new (its first heartbeat, or the first after it had expired). Parsed strictly: a store that
/// answers anything else gets `fleetStoreUnusable`.
struct FleetView: Equatable, Sendable {
    var registered: Bool
    var relays: [(name: String, trunk: String)]

    static func == (a: FleetView, b: FleetView) -> Bool {
        a.registered == b.registered && a.relays.elementsEqual(b.relays) { $0 == $1 }
    }

    /// The keys and arguments of one heartbeat (`register`: false deregisters: a relay shutting down).
    static func command(
        prefix: String, relay: String, trunk: String, lifetimeMilliseconds: Int64, register: Bool
    ) -> [String] {
        [
            "EVAL", script, "2", prefix + "relays", prefix + "trunks", relay, String(lifetimeMilliseconds), trunk,
            register ? "1" : "0",
        ]
    }

    /// Expires the relays past their time (by the store's clock, the only one all relays share), renews this
    /// relay's, and returns {registered, name1, trunk1, name2, trunk2, ...}.
    static let script = """
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)) do redis.call('HDEL', KEYS[2], id) end
        redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
        local registered = 0
        if ARGV[4] == '1' then
          registered = redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
          redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
        else
          redis.call('ZREM', KEYS[1], ARGV[1])
          redis.call('HDEL', KEYS[2], ARGV[1])
        end
        local out = {registered}
        for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, 62)) do
          out[#out + 1] = id
          out[#out + 1] = redis.call('HGET', KEYS[2], id) or ''
        end
        return out
        """

    /// The most relays a view lists (the script returns the first 63 by expiry).
    static let maximumRelays = 63

    /// Parses a reply of `script`.
    init(_ reply: RESPValue) throws(TransportError) {
        guard case .array(let items?) = reply, let first = items.first, items.count % 2 == 1,
            case .integer(let registered) = first, registered == 0 || registered == 1
        else { throw Self.unusable("a heartbeat's answer is not {registered, name, trunk, ...}: \(reply)") }
        var relays: [(String, String)] = []
        var index = 1
        while index < items.count {
            guard case .bulk(let nameBytes?) = items[index], case .bulk(let trunkBytes?) = items[index + 1],
                let name = String(validating: nameBytes, as: UTF8.self), Self.isName(name),
                let trunk = String(validating: trunkBytes, as: UTF8.self), trunk.utf8.count <= 300
            else { throw Self.unusable("a heartbeat's answer names a relay that is no valid name and trunk") }
            relays.append((name, trunk))
            index += 2
        }
        self.registered = registered == 1
        self.relays = relays
    }

    init(registered: Bool, relays: [(name: String, trunk: String)]) {
        self.registered = registered
        self.relays = relays
    }

    /// 1 to 64 printable ASCII characters.
    static func isName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 64 && name.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7f }
    }

    static func unusable(_ message: String) -> TransportError {
        TransportError(.fleetStoreUnusable, message + "; is this the fleet's Redis 7 or Valkey?")
    }
}
