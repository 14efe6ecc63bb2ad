import Glibc
import TransportCore

/// Since when a Redis remembers the fleet's 0-RTT keys: one key without expiry, `prefix ‖ "memory"`, holding
/// "MILLISECONDS RUN_ID": the wall-clock time a relay first saw this Redis process, and the process' `run_id`
/// (random for each start of a Redis server).
///
/// A relay checks it on every new connection. When the key is missing (a Redis restarted without its data, a
/// flush) or names another run ID (any restart, which may have reloaded an older snapshot; a replica promoted by
/// a failover, which may lack the last writes), keys may have been lost, so tickets issued before may have
/// carried 0-RTT without Redis remembering it: the relay writes a new marker with the current time, and tickets
/// created before it (plus the clock-skew allowance) are refused 0-RTT from then on — for at most one window,
/// never a replay accepted. (Conservative: a restart that kept every key costs the same.)
package enum RedisMemoryMarker {
    /// The commands that read the marker and the Redis' replication state (send them on a new connection).
    package static func readCommands(prefix: String) -> [[String]] {
        [["GET", prefix + "memory"], ["INFO", "server"], ["INFO", "replication"]]
    }

    /// From the replies to `readCommands`: the memory's start in milliseconds since the epoch, or nil with the
    /// command that writes a new marker at `nowMilliseconds` (the caller then sends it and uses that time).
    /// Throws when the server is not a primary (a replica refuses writes) or the replies are not what Redis sends.
    package static func start(
        fromReplies replies: [RESPValue], prefix: String, nowMilliseconds: Int64
    ) throws(TransportError) -> (start: Int64, write: [String]?) {
        var fields: [Substring: Substring] = [:]
        for reply in replies.dropFirst() {
            guard case .bulk(let info?) = reply, replies.count == 3 else {
                throw TransportError(.protocolViolation, "Redis: unexpected reply to INFO: \(reply)")
            }
            for line in String(decoding: info, as: UTF8.self).split(whereSeparator: \.isNewline) {
                guard let colon = line.firstIndex(of: ":") else { continue }
                fields[line[..<colon]] = line[line.index(after: colon)...]
            }
        }
        guard fields["role"] == "master", let runID = fields["run_id"], !runID.isEmpty else {
            throw TransportError(.unreachable, "Redis is not a primary (role \(fields["role"] ?? "unknown"))")
        }
        if case .bulk(let value?) = replies[0] {
            let parts = String(decoding: value, as: UTF8.self).split(separator: " ")
            if parts.count == 2, let start = Int64(parts[0]), parts[1] == runID { return (start, nil) }
        } else if case .error(let text) = replies[0] {
            throw TransportError(.protocolViolation, "Redis refused GET: \(text)")
        }
        return (nowMilliseconds, ["SET", prefix + "memory", "\(nowMilliseconds) \(runID)"])
    }

    /// Reads (and when needed writes) the marker on `connection`, all before `deadline`.
    package static func establish(
        on connection: RedisConnection, prefix: String, deadline: UInt64
    ) throws(TransportError) -> Int64 {
        let replies = try connection.call(readCommands(prefix: prefix), deadline: deadline)
        let now = Self.wallClockMilliseconds()
        let (start, write) = try start(fromReplies: replies, prefix: prefix, nowMilliseconds: now)
        if let write {
            let reply = try connection.call([write], deadline: deadline)
            guard reply.first == .simpleString("OK") else {
                throw TransportError(.unreachable, "Redis refused to write the memory marker: \(reply)")
            }
        }
        return start
    }

    /// CLOCK_REALTIME in milliseconds (the clock tickets are stamped with).
    package static func wallClockMilliseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
    }
}
