internal import CNgtcp2
import Glibc

/// The 0-RTT anti-replay memory behind GnuTLS' `gnutls_anti_replay_*`: every ClientHello that carries early data
/// is recorded for the window; a duplicate is refused (`GNUTLS_E_DB_ENTRY_EXISTS`) and so is anything once the
/// store is full (fail closed): GnuTLS then rejects the early data and the handshake continues in 1-RTT.
///
/// Memory: about 100 bytes per 0-RTT attempt within the window; `capacity` bounds it. A longer window lets
/// phones that slept longer resume with 0-RTT, at the cost of more entries.
package final class AntiReplayStore {
    private var entries: [[UInt8]: Int64] = [:]  // key → expiry (seconds since the epoch)
    package let capacity: Int
    package private(set) var accepted: UInt64 = 0
    package private(set) var duplicates: UInt64 = 0
    package private(set) var refusedFull: UInt64 = 0
    /// The wall clock, in seconds (injectable for tests).
    var now: () -> Int64 = { Int64(time(nil)) }

    package init(capacity: Int) { self.capacity = max(1, capacity) }

    package var count: Int { entries.count }

    /// Records `key` until `expiry`; false (refuse 0-RTT) for a duplicate or when full of live entries.
    package func add(key: [UInt8], expiry: Int64) -> Bool {
        let current = now()
        if let existing = entries[key], existing >= current {
            duplicates += 1
            return false
        }
        if entries.count >= capacity {
            entries = entries.filter { $0.value >= current }
            if entries.count >= capacity {
                refusedFull += 1
                return false
            }
        }
        entries[key] = expiry
        accepted += 1
        return true
    }
}

/// Owns the GnuTLS anti-replay context wired to an `AntiReplayStore`.
final class GnuTLSAntiReplay {
    let context: gnutls_anti_replay_t
    let store: AntiReplayStore

    init(windowMilliseconds: UInt32, store: AntiReplayStore) throws(TransportError) {
        var context: gnutls_anti_replay_t?
        try gnutlsCheck(gnutls_anti_replay_init(&context), "creating the 0-RTT anti-replay context")
        self.context = context!
        self.store = store
        gnutls_anti_replay_set_window(self.context, windowMilliseconds)
        // Unretained: this object owns the context and outlives every session that uses it.
        gnutls_anti_replay_set_ptr(self.context, Unmanaged.passUnretained(store).toOpaque())
        gnutls_anti_replay_set_add_function(self.context) { pointer, expiry, key, _ in
            let store = Unmanaged<AntiReplayStore>.fromOpaque(pointer!).takeUnretainedValue()
            let datum = key!.pointee
            let bytes = Array(UnsafeBufferPointer(start: datum.data, count: Int(datum.size)))
            return store.add(key: bytes, expiry: Int64(expiry)) ? 0 : GNUTLS_E_DB_ENTRY_EXISTS
        }
    }

    deinit { gnutls_anti_replay_deinit(context) }
}
