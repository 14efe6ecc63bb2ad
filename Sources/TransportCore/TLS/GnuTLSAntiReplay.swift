internal import CNgtcp2
internal import CTransportShims
import Glibc

/// Owns the GnuTLS anti-replay context wired to a `ZeroRTTAdmission`, keyed by ticket: the server's handshake hook
/// (`TLSServerContext`) tells it each ticket the server issues (`ticketIssued`) and each ClientHello's ticket
/// (`clientHelloArrived`, `clientHelloProcessed`), and GnuTLS asks it whether to accept that ClientHello's early
/// data.
///
/// GnuTLS hands its add function the PSK binder, not the ticket, and no session; the ClientHello hook notes the
/// ticket before GnuTLS processes the message, within the same `gnutls_handshake` call that then asks to record
/// it. One context's sessions run on one thread (each event loop of a server has its own `TLSServerContext`), so
/// the note cannot be another session's.
///
/// **A store that answers later.** GnuTLS asks synchronously, inside `gnutls_handshake`; a shared store (Redis)
/// answers after a round trip, which the event loop must not wait for. So when the store answers `ask`, and the
/// owner of the session being fed can hold what it fed (`beginFeed(holdable: true)`: the QUIC endpoint before a
/// connection's ClientHello was read, a TCP session before its ClientHello was read) and this loop holds fewer
/// than `maxHeldFlights` flights, the add function refuses for now and the ClientHello hook that runs right after
/// GnuTLS processed the message ends the handshake — before anything was sent. The owner finds the claim in
/// `endFeed()`, drops the session silently, holds the bytes it fed (and those that follow), starts the claim
/// (`ZeroRTTAdmission.claim`), and when the answer comes feeds them to a fresh session inside `deciding(_:_:_:)`,
/// where the add function finds the answer for exactly that ticket, once. Over the bound the early data is refused
/// at once (counted as `notHeld`) and the handshake goes on in 1-RTT: it is never dropped. GnuTLS runs every check
/// of its own before the add function (the ticket opens with the server's key, its MAC, age and window, the binder),
/// so no claim is made for a ticket GnuTLS would refuse.
///
/// **The key.** A GnuTLS 3.7.9 ticket is key_name (16) ‖ IV (16) ‖ length (2) ‖ encrypted state ‖ MAC (20,
/// HMAC-SHA1 over everything before it); GnuTLS ignores bytes after the MAC, so the store keys on what the MAC
/// covers (`digest`), and a ticket with bytes appended is the same ticket.
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
    /// The most first flights this loop holds at once while the store is asked.
    let maxHeldFlights: Int
    /// First flights held now (one per `ZeroRTTClaim` alive).
    fileprivate(set) var heldFlights = 0
    /// The recording start set for the ClientHello being processed (unix seconds), passed to the store; without
    /// the shim, when the context was made (GnuTLS' start is never earlier).
    private var recordingStart = Int64(time(nil))
    /// The ClientHello being processed: the key of its ticket (nil when it offers none or several: RFC 8446
    /// §4.2.10 allows early data with the first identity only, and GnuTLS does not check which it selected), whether
    /// it offers early data, and whether GnuTLS asked about it.
    private var presentedTicket: TicketDigest?
    private var offersEarlyData = false
    private var asked = false
    /// The feeds in progress, innermost last: whether its session may be held, and the claim the hooks started.
    private var feeds: [(holdable: Bool, claim: ZeroRTTClaim?)] = []
    /// The store's answer for one ticket, within `deciding`.
    private var decided: (ticket: TicketDigest, accepted: Bool)?
    /// GnuTLS' code for "end this handshake: the store is being asked" (an application error: fatal, never sent).
    static let heldForClaim = GNUTLS_E_APPLICATION_ERROR_MAX

    init(store: any ZeroRTTAdmission, maxHeldFlights: Int = 512) throws(TransportError) {
        var context: gnutls_anti_replay_t?
        try gnutlsCheck(gnutls_anti_replay_init(&context), "creating the 0-RTT anti-replay context")
        self.context = context!
        self.store = store
        self.maxHeldFlights = max(0, maxHeldFlights)
        backdatesStart = store.outlivesProcess && ptt_anti_replay_layout_known(self.context) == 1
        let ownWindow = UInt32(clamping: store.window * 1000)
        gnutls_anti_replay_set_window(self.context, store.outlivesProcess && !backdatesStart ? ownWindow : UInt32.max)
        // Unretained: this object owns the context and outlives every session that uses it.
        gnutls_anti_replay_set_ptr(self.context, Unmanaged.passUnretained(self).toOpaque())
        gnutls_anti_replay_set_add_function(self.context) { pointer, _, _, _ in
            // GnuTLS' key (its recording start time and the binder) is not used: the store keys on the ticket, so
            // the contexts of a server's loops recognise each other's tickets and a ticket carries 0-RTT once.
            Unmanaged<GnuTLSAntiReplay>.fromOpaque(pointer!).takeUnretainedValue().decide()
                ? 0 : GNUTLS_E_DB_ENTRY_EXISTS
        }
    }

    /// The add function: whether GnuTLS may accept the early data of the ClientHello being processed.
    private func decide() -> Bool {
        asked = true
        guard let ticket = presentedTicket else {
            store.count(.ticketUnknownOrExpired)  // several tickets offered
            return false
        }
        if let decided, decided.ticket == ticket {
            self.decided = nil
            if decided.accepted { store.count(.acceptedAfterClaim) }
            return decided.accepted
        }
        switch store.admit(ticket, recordingStart: recordingStart) {
        case .accept: return true
        case .refuse: return false
        case .ask:
            if let feed = feeds.last, feed.holdable, feed.claim == nil, heldFlights < maxHeldFlights {
                feeds[feeds.count - 1].claim = ZeroRTTClaim(ticket: ticket, owner: self)
            } else {
                store.count(.notHeld)
            }
            return false  // for now: the ClientHello hook ends the handshake when a claim started
        }
    }

    /// Server ClientHello hook, before GnuTLS reads the message: notes the ticket it resumes, if exactly one.
    func clientHelloArrived(_ clientHello: UnsafeRawBufferPointer) {
        let offer = TicketKeySelection.offer(clientHello: clientHello)
        presentedTicket = offer.tickets?.count == 1 ? offer.tickets.map { Self.digest($0[0]) } : nil
        offersEarlyData = offer.earlyData && offer.tickets != nil
        asked = false
        if backdatesStart, presentedTicket != nil {
            recordingStart = max(Int64(time(nil)) - store.window, store.rememberedSince ?? 0)
            ptt_anti_replay_set_start(context, recordingStart)
        }
    }

    /// Server ClientHello hook, after GnuTLS processed the message: ends the handshake (`heldForClaim`) when the
    /// add function started a claim, else 0. Counts early data GnuTLS refused without asking (a ticket that did not
    /// open, or older than the window or the store's memory).
    func clientHelloProcessed(_ session: gnutls_session_t) -> Int32 {
        defer {
            presentedTicket = nil
            offersEarlyData = false
        }
        if feeds.last?.claim != nil { return Self.heldForClaim }
        if offersEarlyData && !asked { store.count(.ticketUnknownOrExpired) }
        return 0
    }

    /// Whether the feed in progress ended its handshake to ask the store (the session's owner then ends the
    /// connection without a word: nothing was sent, and the flight is fed again later).
    var isHoldingForClaim: Bool { feeds.last?.claim != nil }

    /// The handshake fails for another reason (ALPN) after a claim started: the claim is dropped, nothing held.
    func dropClaim() {
        if !feeds.isEmpty { feeds[feeds.count - 1].claim = nil }
    }

    /// Before feeding a server session bytes: `holdable` when the caller keeps what it feeds until the
    /// ClientHello was read, so it can feed it again to a fresh session (see the type's documentation).
    func beginFeed(holdable: Bool) { feeds.append((holdable, nil)) }

    /// After the feed begun last: the claim to make when the hooks ended the handshake to ask the store (drop
    /// the session without a word, hold the flight, `claim`, then feed it again within `deciding`); else nil.
    func endFeed() -> ZeroRTTClaim? { feeds.popLast()?.claim ?? nil }

    /// Runs `body` (which feeds a held flight again) with the store's answer for `ticket`: the add function takes
    /// it for that ticket, once; a ClientHello of another ticket is decided as usual.
    func deciding<T, E: Error>(_ ticket: TicketDigest, accepted: Bool, _ body: () throws(E) -> T) throws(E) -> T {
        let outer = decided
        decided = (ticket, accepted)
        defer { decided = outer }
        return try body()
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

    /// The bytes of a GnuTLS ticket its MAC covers: key_name (16) ‖ IV (16) ‖ length (2) ‖ that many bytes of
    /// encrypted state, when the MAC (20) follows them; what follows the MAC GnuTLS ignores. A ticket too short for
    /// its length (GnuTLS refuses it) is taken whole.
    static func macCovered(_ ticket: [UInt8]) -> ArraySlice<UInt8> {
        let header = 16 + 16 + 2
        guard ticket.count >= header else { return ticket[...] }
        let covered = header + (Int(ticket[32]) << 8 | Int(ticket[33]))
        guard ticket.count >= covered + 20 else { return ticket[...] }
        return ticket[..<covered]
    }

    /// The store's key for a ticket: the first 128 bits of the SHA-256 of what its MAC covers.
    static func digest(_ ticket: [UInt8]) -> TicketDigest {
        var digest = [UInt8](repeating: 0, count: 32)
        _ = macCovered(ticket).withUnsafeBytes { bytes in
            digest.withUnsafeMutableBytes {
                gnutls_hash_fast(GNUTLS_DIG_SHA256, bytes.baseAddress, bytes.count, $0.baseAddress)
            }
        }
        return TicketDigest(digestBytes: digest)
    }

    deinit { gnutls_anti_replay_deinit(context) }
}

/// A ticket whose claim in the shared store was started with its first flight held (see `GnuTLSAntiReplay`): the
/// flight's place in its loop's bound is taken while this object lives, so whoever holds the flight keeps it until
/// the flight is fed again or dropped.
///
/// - Important: Not thread-safe: created, kept and released on the event loop of the context that made it.
package final class ZeroRTTClaim {
    /// The ticket's key in the store.
    package let ticket: TicketDigest
    private weak var owner: GnuTLSAntiReplay?

    fileprivate init(ticket: TicketDigest, owner: GnuTLSAntiReplay) {
        self.ticket = ticket
        self.owner = owner
        owner.heldFlights += 1
    }

    deinit { owner?.heldFlights -= 1 }
}
