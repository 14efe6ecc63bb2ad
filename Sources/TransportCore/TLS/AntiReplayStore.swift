internal import CNgtcp2
import Glibc

/// The 0-RTT anti-replay memory behind GnuTLS' `gnutls_anti_replay_*`: every ticket used for early data is recorded
/// for the window, so a ticket carries 0-RTT once (single-use for early data, RFC 8446 §8.1); a second use is
/// refused (`GNUTLS_E_DB_ENTRY_EXISTS`) and so is anything once the store is full (fail closed): GnuTLS then rejects
/// the early data and the handshake continues in 1-RTT.
///
/// Keyed by ticket, not by ClientHello (GnuTLS' own key is the PSK binder, which a client holding one ticket makes
/// anew with every ClientHello): filling the store takes one ticket per entry, that is one full handshake each,
/// under the per-source admission limits, instead of one packet each (issue 21, item 13: 102,760 ClientHellos
/// resuming one ticket filled the 100,000 entries and turned 0-RTT off for every client, on both paths).
///
/// Memory: about 100 bytes per ticket used for 0-RTT within the window; `capacity` bounds it. A longer window lets
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
        /// No entry expires before this: while the store is full and this is in the future, a newcomer is refused
        /// without rebuilding the table (a rebuild per attempt cost 0.28 ms of CPU under the lock).
        var earliestExpiry = Int64.max
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
            if state.earliestExpiry < current {
                state.entries = state.entries.filter { $0.value >= current }
                state.earliestExpiry = state.entries.values.min() ?? .max
            }
            if state.entries.count >= capacity {
                state.refusedFull += 1
                return false
            }
        }
        state.earliestExpiry = min(state.earliestExpiry, expiry)
        state.entries[key] = expiry
        state.accepted += 1
        return true
    }
}

/// Owns the GnuTLS anti-replay context wired to an `AntiReplayStore`, keyed by the ticket a ClientHello resumes.
///
/// GnuTLS hands its add function the PSK binder, not the ticket, and no session; the server's ClientHello hook
/// (`TLSServerContext`) therefore notes the ticket with `clientHelloArrived` before GnuTLS processes the message,
/// within the same `gnutls_handshake` call that then asks to record it. One context's sessions run on one thread
/// (each event loop of a server has its own `TLSServerContext`), so the note cannot be another session's.
final class GnuTLSAntiReplay {
    let context: gnutls_anti_replay_t
    let store: AntiReplayStore
    /// The ticket of the ClientHello being processed: nil when it offers none or several (RFC 8446 §4.2.10 allows
    /// early data with the first identity only, and GnuTLS does not check which it selected: refused then).
    private var presentedTicket: [UInt8]?

    init(windowMilliseconds: UInt32, store: AntiReplayStore) throws(TransportError) {
        var context: gnutls_anti_replay_t?
        try gnutlsCheck(gnutls_anti_replay_init(&context), "creating the 0-RTT anti-replay context")
        self.context = context!
        self.store = store
        gnutls_anti_replay_set_window(self.context, windowMilliseconds)
        // Unretained: this object owns the context and outlives every session that uses it.
        gnutls_anti_replay_set_ptr(self.context, Unmanaged.passUnretained(self).toOpaque())
        gnutls_anti_replay_set_add_function(self.context) { pointer, expiry, _, _ in
            // GnuTLS' key (its recording start time and the binder) is not used: the store keys on the ticket, so
            // the contexts of a server's loops recognise each other's entries and a ticket carries 0-RTT once. A
            // context still refuses tickets older than itself.
            let owner = Unmanaged<GnuTLSAntiReplay>.fromOpaque(pointer!).takeUnretainedValue()
            guard let ticket = owner.presentedTicket else { return GNUTLS_E_DB_ENTRY_EXISTS }
            owner.presentedTicket = nil
            return owner.store.add(key: GnuTLSAntiReplay.digest(ticket), expiry: Int64(expiry))
                ? 0 : GNUTLS_E_DB_ENTRY_EXISTS
        }
    }

    /// Server ClientHello hook, before GnuTLS reads the message: notes the ticket it resumes, if exactly one.
    func clientHelloArrived(_ clientHello: UnsafeRawBufferPointer) {
        let tickets = TicketKeySelection.pskIdentities(clientHello: clientHello)
        presentedTicket = tickets?.count == 1 ? tickets?.first : nil
    }

    /// Whether the ClientHello being processed offered exactly one ticket (for tests).
    var hasPresentedTicket: Bool { presentedTicket != nil }

    /// SHA-256 of a ticket: a fixed 32-byte key whatever the ticket's size.
    private static func digest(_ ticket: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        _ = ticket.withUnsafeBytes { bytes in
            digest.withUnsafeMutableBytes {
                gnutls_hash_fast(GNUTLS_DIG_SHA256, bytes.baseAddress, bytes.count, $0.baseAddress)
            }
        }
        return digest
    }

    deinit { gnutls_anti_replay_deinit(context) }
}
