internal import CNgtcp2

/// The fleet's claim of a ticket in Redis: one Lua script, run atomically by Redis, that proves the store still
/// holds its memory and claims the ticket in the same round trip (`EVALSHA`, with `EVAL` when Redis answers
/// `NOSCRIPT`).
///
/// **One key.** The claims live in one sorted set, `prefix ‖ "claims"`: each member a ticket's digest (hex),
/// scored with when its claim expires (relay wall clock, milliseconds); and one more member, the memory marker
/// `"memory MS RUN_ID"`, scored `+inf`: when this store's memory began (the relay's wall clock when it wrote the
/// marker) and the run ID of the Redis process that holds it (random for every start of a Redis server). The
/// marker and the claims are lost together: a `FLUSHALL`, a `DEL` of the key, an evicting `maxmemory-policy`
/// (which evicts whole keys) take the marker with the claims, a restart or a promoted replica changes the run ID,
/// and another Redis behind the same address has its own key or none. Removing single members by hand is
/// tampering the store cannot see.
///
/// **The script**, with the relay's belief (the marker it last saw), its wall clock, when it last claimed under
/// that belief, and the ticket:
/// 1. Reads the run ID (`INFO server`) and the marker. No marker, or one of another run ID: this memory may lack
///    claims — writes a new marker at the relay's now and refuses (`memoryChanged`).
/// 2. A marker other than the relay's belief: refuses and returns it (`memoryChanged`), so the relay learns it;
///    and when the relay's belief named another Redis process and this marker is older than the relay's last
///    claim there (the relay's claims went elsewhere since this memory began: a proxy switched it to a Redis
///    the fleet used before, or a split), writes a new marker first.
/// 3. The marker is the belief: drops up to 8 expired claims and `ZADD NX`: 1, the ticket's first use (claimed);
///    0, used before (a replay).
///
/// A relay that learns a new marker refuses 0-RTT for tickets issued before it plus the clock-skew allowance
/// (GnuTLS' recording start, `ZeroRTTAdmission.rememberedSince`): their claims may be in a memory that is gone.
package enum RedisClaimScript {
    package static let source = """
        local info = redis.call('INFO', 'server')
        local run = string.match(info, 'run_id:(%x+)')
        local found = redis.call('ZRANGEBYSCORE', KEYS[1], '+inf', '+inf', 'LIMIT', 0, 1)
        local marker = found[1]
        local function renew()
          redis.call('ZREMRANGEBYSCORE', KEYS[1], '+inf', '+inf')
          marker = 'memory ' .. ARGV[2] .. ' ' .. run
          redis.call('ZADD', KEYS[1], '+inf', marker)
          return {-1, marker}
        end
        local mtime, mrun
        if marker then mtime, mrun = string.match(marker, '^memory (%d+) (%x+)$') end
        if not mrun or mrun ~= run then return renew() end
        if marker ~= ARGV[1] then
          local brun = string.match(ARGV[1], '^memory %d+ (%x+)$')
          if brun and brun ~= run and tonumber(mtime) < tonumber(ARGV[3]) then return renew() end
          return {-1, marker}
        end
        if ARGV[4] == '' then return {2, marker} end
        local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[2], 'LIMIT', 0, 8)
        if #expired > 0 then redis.call('ZREM', KEYS[1], unpack(expired)) end
        return {redis.call('ZADD', KEYS[1], 'NX', tonumber(ARGV[2]) + tonumber(ARGV[5]), ARGV[4]), marker}
        """

    /// The script's SHA-1 in hex (what `EVALSHA` names it by).
    package static let sha1: String = {
        var digest = [UInt8](repeating: 0, count: 20)
        let bytes = Array(source.utf8)
        _ = bytes.withUnsafeBytes { input in
            digest.withUnsafeMutableBytes {
                gnutls_hash_fast(GNUTLS_DIG_SHA1, input.baseAddress, input.count, $0.baseAddress)
            }
        }
        return digest.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }
            .joined()
    }()

    /// The key the claims and the marker live in.
    package static func key(prefix: String) -> String { prefix + "claims" }

    /// What a relay asks: its belief ("" for none), its wall clock and its last claim under the belief (ms), the
    /// ticket's digest in hex ("" to read the marker only), and how long a claim lives (ms).
    package struct Request: Equatable, Sendable {
        package var belief: String
        package var nowMilliseconds: Int64
        package var lastClaimMilliseconds: Int64
        package var ticket: String
        package var lifetimeMilliseconds: Int64

        package init(
            belief: String, nowMilliseconds: Int64, lastClaimMilliseconds: Int64, ticket: String,
            lifetimeMilliseconds: Int64
        ) {
            self.belief = belief
            self.nowMilliseconds = nowMilliseconds
            self.lastClaimMilliseconds = lastClaimMilliseconds
            self.ticket = ticket
            self.lifetimeMilliseconds = lifetimeMilliseconds
        }

        var arguments: [String] {
            [belief, String(nowMilliseconds), String(lastClaimMilliseconds), ticket, String(lifetimeMilliseconds)]
        }
    }

    /// `EVALSHA` of the script (`byHash`), or `EVAL` with its source.
    package static func command(prefix: String, _ request: Request, byHash: Bool) -> [String] {
        [byHash ? "EVALSHA" : "EVAL", byHash ? sha1 : source, "1", key(prefix: prefix)] + request.arguments
    }

    /// What the script answered.
    package enum Reply: Equatable, Sendable {
        /// The ticket's first use: claimed.
        case claimed(marker: String)
        /// The ticket was claimed before: a replay.
        case duplicate(marker: String)
        /// The store's memory is not the relay's belief (lost, another process, another relay marked it anew):
        /// nothing claimed; the relay learns `marker`.
        case memoryChanged(marker: String)
        /// The marker, read without a ticket, and the relay's belief was right.
        case marker(String)
    }

    /// The script's reply, or nil when it is not one (another command's, a damaged one).
    package static func reply(_ value: RESPValue) -> Reply? {
        guard case .array(let items?) = value, items.count == 2, case .integer(let status) = items[0],
            case .bulk(let bytes?) = items[1], let marker = MemoryMarker(String(decoding: bytes, as: UTF8.self))
        else { return nil }
        switch status {
        case 1: return .claimed(marker: marker.text)
        case 0: return .duplicate(marker: marker.text)
        case -1: return .memoryChanged(marker: marker.text)
        case 2: return .marker(marker.text)
        default: return nil
        }
    }

    /// A memory marker, `"memory MS RUN_ID"`.
    package struct MemoryMarker: Equatable, Sendable {
        package let text: String
        /// When the memory began, the marking relay's wall clock in milliseconds since the epoch.
        package let milliseconds: Int64
        package let runID: Substring

        package init?(_ text: String) {
            let parts = text.split(separator: " ", omittingEmptySubsequences: false)
            guard parts.count == 3, parts[0] == "memory", let milliseconds = Int64(parts[1]), milliseconds >= 0,
                !parts[2].isEmpty, parts[2].allSatisfy(\.isHexDigit)
            else { return nil }
            self.text = text
            self.milliseconds = milliseconds
            runID = parts[2]
        }
    }
}
