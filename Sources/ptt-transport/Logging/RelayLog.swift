import CommandLineSupport
import Foundation
import Synchronization

/// The relay's log: one JSON object per line on stderr — `time` (RFC 3339, UTC, milliseconds), `level` (`info`,
/// `warning`, `error`), `event`, and the event's fields. `serve` writes start, listen, drain, stop, worker
/// starts and restarts, the anti-replay store's state changes and errors; per-packet events stay on stdout behind
/// `--events`. Rate-limited per event name: at most `burst` lines, refilled at `perSecond`; the next line written
/// for that event carries `suppressed`, how many were dropped meanwhile.
enum RelayLog {
    static let burst = 20.0
    static let perSecond = 5.0

    private struct Bucket {
        var tokens = RelayLog.burst
        var refilled = ContinuousClock.now
        var suppressed = 0
    }

    private static let buckets = Mutex<[String: Bucket]>([:])
    private static let started = Atomic<Bool>(false)

    /// Whether `serve` started a relay (a signal that exits at once logs its stop then).
    static var serving: Bool { started.load(ordering: .relaxed) }

    /// Marks the relay started (see `serving`).
    static func markServing() { started.store(true, ordering: .relaxed) }

    static func info(_ event: String, _ fields: [String: Any] = [:]) { write("info", event, fields) }
    static func warning(_ event: String, _ fields: [String: Any] = [:]) { write("warning", event, fields) }
    static func error(_ event: String, _ fields: [String: Any] = [:]) { write("error", event, fields) }

    /// `date` in RFC 3339, UTC, with milliseconds: `2026-11-28T08:12:00.123Z`.
    static func timestamp(_ date: Date = Date()) -> String {
        let seconds = Int(date.timeIntervalSince1970)
        let milliseconds = Int((date.timeIntervalSince1970 - Double(seconds)) * 1000)
        var value = time_t(seconds)
        var parts = tm()
        gmtime_r(&value, &parts)
        return String(
            format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1,
            Int(parts.tm_mday), Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec), milliseconds)
    }

    private static func write(_ level: String, _ event: String, _ fields: [String: Any]) {
        let suppressed: Int? = buckets.withLock { buckets in
            var bucket = buckets[event] ?? Bucket()
            let now = ContinuousClock.now
            let elapsed = now - bucket.refilled
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            bucket.tokens = min(burst, bucket.tokens + seconds * perSecond)
            bucket.refilled = now
            defer { buckets[event] = bucket }
            guard bucket.tokens >= 1 else {
                bucket.suppressed += 1
                return nil
            }
            bucket.tokens -= 1
            defer { bucket.suppressed = 0 }
            return bucket.suppressed
        }
        guard let suppressed else { return }
        var object = fields
        object["time"] = timestamp()
        object["level"] = level
        object["event"] = event
        if suppressed > 0 { object["suppressed"] = suppressed }
        FileHandle.standardError.write(Data((JSONOutput.line(object) + "\n").utf8))
    }
}
