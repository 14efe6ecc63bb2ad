internal import CNgtcp2
internal import CTransportShims

/// Which QUIC version a client connection starts in when it resumes: a session ticket and a NEW_TOKEN token belong
/// to the version of the connection that issued them (RFC 9369 §5), and 0-RTT travels in the version the client
/// starts in (RFC 9368 §4: never in a version negotiated later). So a negotiating client starts in the ticket's
/// version; a client pinned to another version, or a build without that version, drops ticket and token (the RTT
/// still seeds the estimate) and makes a full handshake.
package struct ResumedVersion: Sendable {
    /// The parameters to connect with (`quicVersion` possibly moved to the ticket's).
    package var parameters: QUICParameters
    /// The resumption data to use (nil: none; ticket and token removed when their version cannot be used).
    package var resumption: ClientResumption?
    /// Why the ticket was dropped, for `resumptionDiagnostic` (nil: it was not).
    package var droppedBecause: String?

    /// Decides for `parameters` (already validated) and `resumption`.
    package init(parameters: QUICParameters, resumption: ClientResumption?) {
        self.parameters = parameters
        self.resumption = resumption
        guard let saved = resumption, !saved.ticket.isEmpty || !saved.token.isEmpty,
            saved.quicVersion != parameters.quicVersion
        else { return }
        let usable = saved.quicVersion == UInt32(PTT_QUIC_V1) || LinkedNgtcp2.supportsQUICVersion2
        if parameters.negotiatesVersion, usable {
            self.parameters.quicVersion = saved.quicVersion
            return
        }
        self.resumption = ClientResumption(
            ticket: [], transportParameters: [], token: [], smoothedRTT: saved.smoothedRTT,
            quicVersion: parameters.quicVersion)
        let why =
            usable
            ? "this connection is configured to speak only QUIC \(Self.name(parameters.quicVersion))"
            : "this build's ngtcp2 \(LinkedNgtcp2.version) does not speak it"
        droppedBecause =
            "the saved ticket was issued in QUIC \(Self.name(saved.quicVersion)) and is bound to it (RFC 9369 §5), "
            + "but \(why); connecting with a full handshake"
    }

    /// Whether `error` ended a client connection because the server answered its first flight with Version
    /// Negotiation (the server does not speak the version the client started in).
    package static func isVersionNegotiation(_ error: TransportError) -> Bool {
        error.libraryCode == Int(NGTCP2_ERR_RECV_VERSION_NEGOTIATION)
    }

    /// "v1", "v2", or the codepoint in hex.
    static func name(_ version: UInt32) -> String {
        switch version {
        case UInt32(PTT_QUIC_V1): "v1"
        case UInt32(PTT_QUIC_V2): "v2"
        default: "0x" + String(version, radix: 16)
        }
    }
}
