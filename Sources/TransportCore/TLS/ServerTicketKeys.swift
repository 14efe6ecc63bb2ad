internal import CNgtcp2
import Glibc

/// The session-ticket keys a server session seals and opens tickets with: the current 64-byte master key and,
/// during a rotation, the previous one (see `TicketKeySelection`). A GnuTLS session's db pointer points at the
/// keys it uses, for the ClientHello hook; they are also the session's key-log source.
///
/// Binding to ALPN: GnuTLS 3.7.9 keeps no ALPN in its tickets and accepts early data whatever ALPN the resumed
/// session had, where RFC 8446 §4.2.10 requires refusing it. `bound(toALPN:)` derives keys that open only the
/// tickets sealed under that ALPN, so a ticket issued under another protocol (a QUIC ticket over TCP) costs a
/// full handshake and never carries 0-RTT.
final class ServerTicketKeys: KeyLogSource {
    let current: UnsafeMutablePointer<gnutls_datum_t>
    let previous: UnsafeMutablePointer<gnutls_datum_t>?
    let keyLog: KeyLogWriter?
    /// The context's anti-replay state, told about each ClientHello's ticket (see `GnuTLSAntiReplay`).
    let antiReplay: GnuTLSAntiReplay?
    /// Keys derived from these (`bound(toALPN:)`, `bound(toQUICVersion:)`), by derivation message, each made once:
    /// every TCP session and every v2 connection asks for the same ones. Touched only on the event loop of the
    /// context that owns these keys, as the keys themselves are.
    private var derived: [[UInt8]: ServerTicketKeys] = [:]

    /// Copies of `current` (zeros when nil, to be filled in by the caller) and `previous`.
    init(current: [UInt8]?, previous: [UInt8]?, keyLog: KeyLogWriter?, antiReplay: GnuTLSAntiReplay?) {
        self.current = Self.secretDatum(current)
        self.previous = previous.map(Self.secretDatum)
        self.keyLog = keyLog
        self.antiReplay = antiReplay
    }

    deinit {
        Self.wipeAndFree(current)
        if let previous { Self.wipeAndFree(previous) }
    }

    /// Keys for sessions that select `alpn`: each master key is replaced by HMAC-SHA512(master, label ‖ alpn).
    func bound(toALPN alpn: String) throws(TransportError) -> ServerTicketKeys {
        try bound(Array("ptt session tickets for ALPN ".utf8) + Array(alpn.utf8), "ALPN \(alpn)")
    }

    /// Keys for QUIC connections in `version` (wire codepoint). A ticket belongs to the QUIC version of the
    /// connection that issued it (RFC 9369 §5): v1 keeps the master keys as they are (tickets issued before versions
    /// were told apart stay valid), any other version derives its own, HMAC-SHA512(master, label ‖ version), so a
    /// v2 ticket presented in a v1 connection (or the reverse) opens nothing and costs a full handshake.
    func bound(toQUICVersion version: UInt32) throws(TransportError) -> ServerTicketKeys {
        guard version != LinkedNgtcp2.quicVersion1 else { return self }
        return try bound(
            VersionBinding.message("ptt session tickets for QUIC version ", version),
            "QUIC version 0x\(String(version, radix: 16))")
    }

    /// Keys whose masters are HMAC-SHA512(master, `message`), made on the first call; `what` names them in errors.
    private func bound(_ message: [UInt8], _ what: String) throws(TransportError) -> ServerTicketKeys {
        if let keys = derived[message] { return keys }
        var derivedCurrent = try Self.derive(current, message, what)
        var derivedPrevious = try previous.map { key throws(TransportError) in try Self.derive(key, message, what) }
        defer {  // the copies below are the only ones kept
            derivedCurrent.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 0) }
            derivedPrevious?.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 0) }
        }
        let keys = ServerTicketKeys(
            current: derivedCurrent, previous: derivedPrevious, keyLog: keyLog, antiReplay: antiReplay)
        derived[message] = keys
        return keys
    }

    private static func derive(
        _ key: UnsafeMutablePointer<gnutls_datum_t>, _ message: [UInt8], _ what: String
    ) throws(TransportError) -> [UInt8] {
        var derived = [UInt8](repeating: 0, count: 64)
        let rv = message.withUnsafeBytes { text in
            derived.withUnsafeMutableBytes { out in
                gnutls_hmac_fast(
                    GNUTLS_MAC_SHA512, key.pointee.data, Int(key.pointee.size), text.baseAddress, text.count,
                    out.baseAddress)
            }
        }
        try gnutlsCheck(rv, "deriving the session-ticket key for \(what)")
        return derived
    }

    /// Server ClientHello hook, before GnuTLS reads the message: notes its ticket for anti-replay, and switches
    /// `session` to the previous key when the ticket was sealed with it.
    func clientHelloArrived(_ session: gnutls_session_t, clientHello: UnsafeRawBufferPointer) {
        antiReplay?.clientHelloArrived(clientHello)
        guard let previous, let name = TicketKeySelection.firstPSKIdentityPrefix(clientHello: clientHello)
        else { return }
        let now = UInt64(max(0, time(nil)))
        func names(_ key: UnsafeMutablePointer<gnutls_datum_t>) -> [[UInt8]] {
            TicketKeySelection.acceptedNames(
                masterKey: UnsafeRawBufferPointer(start: key.pointee.data, count: Int(key.pointee.size)), unixTime: now)
        }
        guard !names(current).contains(name), names(previous).contains(name) else { return }
        _ = gnutls_session_ticket_enable_server(session, previous)
    }

    /// A 64-byte secret on the heap as GnuTLS takes it: a copy of `bytes` (their first 64), or zeros to fill in.
    private static func secretDatum(_ bytes: [UInt8]?) -> UnsafeMutablePointer<gnutls_datum_t> {
        let storage = UnsafeMutablePointer<UInt8>.allocate(capacity: 64)
        storage.initialize(repeating: 0, count: 64)
        if let bytes { storage.update(from: bytes, count: min(bytes.count, 64)) }
        let datum = UnsafeMutablePointer<gnutls_datum_t>.allocate(capacity: 1)
        datum.initialize(to: gnutls_datum_t(data: storage, size: 64))
        return datum
    }

    private static func wipeAndFree(_ datum: UnsafeMutablePointer<gnutls_datum_t>) {
        memset(datum.pointee.data, 0, Int(datum.pointee.size))
        datum.pointee.data.deallocate()
        datum.deallocate()
    }
}
