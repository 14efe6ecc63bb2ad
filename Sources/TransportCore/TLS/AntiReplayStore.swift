internal import CNgtcp2
import Glibc

/// The 0-RTT anti-replay memory behind GnuTLS' `gnutls_anti_replay_*`: every ClientHello that carries early data
/// is recorded for the window; a duplicate is refused (`GNUTLS_E_DB_ENTRY_EXISTS`) and so is anything once the
/// store is full (fail closed): GnuTLS then rejects the early data and the handshake continues in 1-RTT.
///
/// Memory: about 100 bytes per 0-RTT attempt within the window; `capacity` bounds it. A longer window lets
/// phones that slept longer resume with 0-RTT, at the cost of more entries.
///
/// One store serves a whole server: when its event loops each run their own GnuTLS contexts, they all record into
/// the same store, so a first flight replayed to another loop is refused too. The store is then guarded by the
/// `serialize` lock its owner passes (TransportCore has no threads and no lock of its own).
package final class AntiReplayStore: @unchecked Sendable {
    // @unchecked Sendable invariant: `state` is touched only inside `serialize`, a lock whenever several threads
    // share the store (without one, the store stays on the one event loop that created it).
    private struct State {
        var entries: [[UInt8]: Int64] = [:]  // key → expiry (seconds since the epoch)
        var accepted: UInt64 = 0
        var duplicates: UInt64 = 0
        var refusedFull: UInt64 = 0
    }

    private var state = State()
    private let serialize: @Sendable (() -> Void) -> Void
    package let capacity: Int
    /// The wall clock, in seconds (injectable for tests).
    var now: () -> Int64 = { Int64(time(nil)) }

    /// A store of at most `capacity` live entries; `serialize` runs each access (pass a lock's critical section
    /// when several threads share the store).
    package init(capacity: Int, serialize: @escaping @Sendable (() -> Void) -> Void = { $0() }) {
        self.capacity = max(1, capacity)
        self.serialize = serialize
    }

    private func read<T>(_ body: (State) -> T) -> T {
        var result: T?
        serialize { result = body(state) }
        return result!
    }

    package var count: Int { read { $0.entries.count } }
    package var accepted: UInt64 { read(\.accepted) }
    package var duplicates: UInt64 { read(\.duplicates) }
    package var refusedFull: UInt64 { read(\.refusedFull) }

    /// Records `key` until `expiry`; false (refuse 0-RTT) for a duplicate or when full of live entries.
    package func add(key: [UInt8], expiry: Int64) -> Bool {
        let current = now()
        var added = false
        serialize { added = record(key: key, expiry: expiry, current: current) }
        return added
    }

    private func record(key: [UInt8], expiry: Int64, current: Int64) -> Bool {
        if let existing = state.entries[key], existing >= current {
            state.duplicates += 1
            return false
        }
        if state.entries.count >= capacity {
            state.entries = state.entries.filter { $0.value >= current }
            if state.entries.count >= capacity {
                state.refusedFull += 1
                return false
            }
        }
        state.entries[key] = expiry
        state.accepted += 1
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
            // GnuTLS 3.7 prefixes the context's recording start time (12 bytes) to the ClientHello's identity:
            // the store keys on the identity alone, so the contexts of a server's loops (started nanoseconds
            // apart) recognise each other's entries. A context still refuses tickets older than itself.
            let bytes = Array(UnsafeBufferPointer(start: datum.data, count: Int(datum.size)).dropFirst(12))
            return store.add(key: bytes, expiry: Int64(expiry)) ? 0 : GNUTLS_E_DB_ENTRY_EXISTS
        }
    }

    deinit { gnutls_anti_replay_deinit(context) }
}
