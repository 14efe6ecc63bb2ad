internal import CNgtcp2
internal import CTransportShims
import Glibc

/// Owns the GnuTLS anti-replay context wired to an `AntiReplayStore`, keyed by ticket: the server's handshake hook
/// (`TLSServerContext`) tells it each ticket the server issues (`ticketIssued`) and each ClientHello's ticket
/// (`clientHelloArrived`), and GnuTLS asks it whether to accept that ClientHello's early data.
///
/// GnuTLS hands its add function the PSK binder, not the ticket, and no session; the ClientHello hook notes the
/// ticket before GnuTLS processes the message, within the same `gnutls_handshake` call that then asks to record
/// it. One context's sessions run on one thread (each event loop of a server has its own `TLSServerContext`), so
/// the note cannot be another session's.
///
/// GnuTLS' own window is switched off (set to its maximum, about 49 days): with it, the first attempt more than
/// one window after the context's start moved the start forward and refused 0-RTT for every ticket issued
/// before, whatever its age. The in-process store enforces each ticket's own window instead, and GnuTLS still
/// refuses tickets created before the context existed: the store knows none of them.
///
/// A store that outlives the process (`ZeroRTTAdmission.outlivesProcess`, the fleet's Redis) remembers every
/// ticket used within its window, whichever process issued it, so refusing older tickets only costs a restarted
/// relay the 0-RTT of its clients. With such a store, before each ClientHello the context's recording start is
/// moved to one window ago (`ptt_anti_replay_set_start`, a version- and layout-checked shim), or to when the store's
/// memory began if that is later (`ZeroRTTAdmission.rememberedSince`): GnuTLS then refuses exactly the tickets
/// older than the window — the window check the shared store cannot make, since it does not see the ticket's
/// age — or older than the store's memory, and accepts younger ones issued before the restart, leaving the single
/// use to the store. Where the shim does not apply (another GnuTLS), GnuTLS' own window is set to the 0-RTT window
/// instead of switched off: its rollover then bounds a ticket's age by the window, and tickets issued before the
/// restart are refused as without the shared store.
final class GnuTLSAntiReplay {
    let context: gnutls_anti_replay_t
    let store: any ZeroRTTAdmission
    /// Whether the recording start follows the window (a store that outlives the process and a known layout).
    let backdatesStart: Bool
    /// The recording start set for the ClientHello being processed (unix seconds), passed to the store; without
    /// the shim, when the context was made (GnuTLS' start is never earlier).
    private var recordingStart = Int64(time(nil))
    /// The ticket of the ClientHello being processed: nil when it offers none or several (RFC 8446 §4.2.10 allows
    /// early data with the first identity only, and GnuTLS does not check which it selected: refused then).
    private var presentedTicket: [UInt8]?

    init(store: any ZeroRTTAdmission) throws(TransportError) {
        var context: gnutls_anti_replay_t?
        try gnutlsCheck(gnutls_anti_replay_init(&context), "creating the 0-RTT anti-replay context")
        self.context = context!
        self.store = store
        backdatesStart = store.outlivesProcess && ptt_anti_replay_layout_known(self.context) == 1
        let ownWindow = UInt32(clamping: store.window * 1000)
        gnutls_anti_replay_set_window(self.context, store.outlivesProcess && !backdatesStart ? ownWindow : UInt32.max)
        // Unretained: this object owns the context and outlives every session that uses it.
        gnutls_anti_replay_set_ptr(self.context, Unmanaged.passUnretained(self).toOpaque())
        gnutls_anti_replay_set_add_function(self.context) { pointer, _, _, _ in
            // GnuTLS' key (its recording start time and the binder) is not used: the store keys on the ticket, so
            // the contexts of a server's loops recognise each other's tickets and a ticket carries 0-RTT once.
            let owner = Unmanaged<GnuTLSAntiReplay>.fromOpaque(pointer!).takeUnretainedValue()
            guard let ticket = owner.presentedTicket else { return GNUTLS_E_DB_ENTRY_EXISTS }
            owner.presentedTicket = nil
            let accepted = owner.store.redeem(GnuTLSAntiReplay.digest(ticket), recordingStart: owner.recordingStart)
            return accepted ? 0 : GNUTLS_E_DB_ENTRY_EXISTS
        }
    }

    /// Server ClientHello hook, before GnuTLS reads the message: notes the ticket it resumes, if exactly one.
    func clientHelloArrived(_ clientHello: UnsafeRawBufferPointer) {
        let tickets = TicketKeySelection.pskIdentities(clientHello: clientHello)
        presentedTicket = tickets?.count == 1 ? tickets?.first : nil
        if backdatesStart, presentedTicket != nil {
            recordingStart = max(Int64(time(nil)) - store.window, store.rememberedSince ?? 0)
            ptt_anti_replay_set_start(context, recordingStart)
        }
    }

    /// Server hook on a NewSessionTicket it sent: records the ticket in the store, within its budget. False when
    /// the message carries no ticket or the budget is spent (the ticket then never carries 0-RTT).
    @discardableResult
    func ticketIssued(newSessionTicket body: UnsafeRawBufferPointer) -> Bool {
        guard let ticket = Self.ticket(newSessionTicket: body) else { return false }
        return store.issue(Self.digest(ticket))
    }

    /// Whether the ClientHello being processed offered exactly one ticket (for tests).
    var hasPresentedTicket: Bool { presentedTicket != nil }

    /// The ticket in a NewSessionTicket body (RFC 8446 §4.6.1: lifetime, age_add, nonce<0..255>,
    /// ticket<1..2^16-1>, extensions), or nil when malformed.
    static func ticket(newSessionTicket body: UnsafeRawBufferPointer) -> [UInt8]? {
        var reader = TLSMessageReader(bytes: body)
        guard reader.skip(4 + 4), reader.skipVector(lengthBytes: 1), let length = reader.number(2), length > 0
        else { return nil }
        return reader.take(length)
    }

    /// The store's key for a ticket: the first 128 bits of its SHA-256.
    static func digest(_ ticket: [UInt8]) -> TicketDigest {
        var digest = [UInt8](repeating: 0, count: 32)
        _ = ticket.withUnsafeBytes { bytes in
            digest.withUnsafeMutableBytes {
                gnutls_hash_fast(GNUTLS_DIG_SHA256, bytes.baseAddress, bytes.count, $0.baseAddress)
            }
        }
        return TicketDigest(digestBytes: digest)
    }

    deinit { gnutls_anti_replay_deinit(context) }
}
