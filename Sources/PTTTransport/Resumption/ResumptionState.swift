import Foundation
import TransportCore

/// Everything a client needs to reconnect fast after the OS killed it: the TLS session ticket, the server's
/// transport parameters (for 0-RTT), the latest NEW_TOKEN, the last RTT, and which transport last worked.
///
/// Persist `serialized()` (file, keychain) and pass `ResumptionState(serialized:)` to
/// `TransportClient.connect(to:resuming:earlyMessages:earlyDatagrams:)`. It is scoped to one server identity
/// (TLS server name, port, ALPN), never offered to another, and it expires; any address of that name may take it
/// (a fleet of relays sharing a ticket key resumes it, and with a shared anti-replay store accepts its 0-RTT). The connection refreshes it on every NewSessionTicket and NEW_TOKEN:
/// read `TransportConnection.resumptionState` before the app is suspended.
///
/// - Important: The blob holds a session secret. Store it like a credential.
public struct ResumptionState: Hashable, Sendable {
    var blob: ResumptionBlob

    /// How long saved state is offered (TLS 1.3 tickets live at most 7 days, RFC 8446 §4.6.1).
    public static let lifetime: TimeInterval = 7 * 86_400

    init(blob: ResumptionBlob) { self.blob = blob }

    /// Decodes a saved state.
    ///
    /// - Throws: `TransportError` with code `resumptionStateUnusable` and the reason (corrupt, truncated,
    ///   foreign, unsupported version). Callers normally log it and connect without state.
    public init(serialized bytes: [UInt8]) throws {
        blob = try ResumptionBlob(decoding: bytes)
    }

    /// The bytes to persist.
    public func serialized() -> [UInt8] { blob.encoded() }

    /// The server name this state belongs to: the TLS name (`ClientConfiguration.serverName`) it was saved
    /// under, whichever of the server's addresses issued it. (State saved before the name was recorded names the
    /// address instead: unless the address is the name, it is ignored once, with a diagnostic, and saved anew.)
    public var host: String { blob.host }
    /// The server port this state belongs to.
    public var port: UInt16 { blob.port }
    /// The ALPN this state belongs to.
    public var alpn: String { blob.alpn }
    /// When the state stops being offered.
    public var expiresAt: Date { Date(timeIntervalSince1970: TimeInterval(blob.expiresAt)) }
    /// The transport that worked last time (a client whose last connection needed TCP races TCP at once).
    public var lastPath: TransportPath { blob.lastTransport == "tcp" ? .tcp : .quic }
    /// The last smoothed RTT: the new connection's first estimate.
    public var smoothedRTT: Duration? { blob.smoothedRTT > 0 ? Duration(nanoseconds: blob.smoothedRTT) : nil }
    /// The QUIC version of the connection that issued the saved ticket and token (v1 for state saved before
    /// versions were recorded). They are bound to it (RFC 9369 §5): a client that negotiates starts its next
    /// connection in it, so 0-RTT travels in that version; one pinned to the other version (or on an ngtcp2 without
    /// v2) makes a full handshake and says so in `resumptionDiagnostic`.
    public var quicVersion: QUICVersion { QUICVersion(wireValue: blob.quicVersion) ?? .version1 }
    /// Whether a QUIC 0-RTT attempt is possible with this state.
    public var allowsEarlyData: Bool { !blob.quicTicket.isEmpty && !blob.quicTransportParameters.isEmpty }

    /// Why this state cannot be used for the server named `serverName` at `address` with `alpn` now, or nil if it
    /// can. State belongs to the server's identity — its TLS name and port — not to one of its addresses, so it
    /// wakes into any relay of a fleet behind that name (RFC 8446 §4.6.1: resume only under the same SNI).
    func unusableReason(
        for address: ServerAddress, serverName: String, alpn: String, now: Date = Date()
    ) -> String? {
        let identity = ServerAddress(host: serverName, port: address.port)
        if blob.host != identity.host || blob.port != identity.port {
            return "it belongs to \(ServerAddress(host: blob.host, port: blob.port)), not \(identity)"
        }
        if blob.alpn != alpn { return "it was made for ALPN \(blob.alpn), not \(alpn)" }
        if TimeInterval(blob.expiresAt) <= now.timeIntervalSince1970 { return "it expired at \(expiresAt)" }
        return nil
    }

    /// The QUIC part in the core's terms (nil when there is no QUIC ticket).
    var quicResumption: ClientResumption? {
        guard !blob.quicTicket.isEmpty else { return nil }
        return ClientResumption(
            ticket: blob.quicTicket, transportParameters: blob.quicTransportParameters,
            token: blob.quicToken, smoothedRTT: blob.smoothedRTT, quicVersion: blob.quicVersion)
    }
}

/// A control message to send as early as possible on a resumed connection.
public struct EarlyMessage: Hashable, Sendable {
    /// The message bytes.
    public var bytes: [UInt8]
    /// Whether replaying it is harmless (a read such as "send me the pending burst"). Only replay-safe messages
    /// travel in 0-RTT; the others wait for the handshake. Messages keep their order: everything after the first
    /// non-replay-safe message waits too.
    public var replaySafe: Bool

    /// A message of `bytes` (1 byte up to the client's `maximumMessageSize`); `replaySafe` lets it travel in
    /// 0-RTT.
    public init(_ bytes: [UInt8], replaySafe: Bool) {
        self.bytes = bytes
        self.replaySafe = replaySafe
    }
}
