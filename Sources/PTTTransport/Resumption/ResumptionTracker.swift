import Foundation
import TransportCore

/// Collects what a client connection learns for the next one (ticket, server parameters, token, RTT) and turns
/// it into a `ResumptionState`. Lives on the connection's event loop.
struct ResumptionTracker {
    let host: String
    let port: UInt16
    let alpn: String
    let path: TransportPath
    var ticket: [UInt8] = []
    var transportParameters: [UInt8] = []
    var token: [UInt8] = []
    var smoothedRTT: UInt64 = 0
    /// The QUIC version the connection speaks (0: not known yet), saved with its ticket and token.
    var quicVersion: UInt32 = 0
    /// Anything else the saved state carried for the other transport, preserved across refreshes.
    var previous: ResumptionBlob?

    /// The state to save now, or nil until a ticket arrived.
    func state(now: Date = Date()) -> ResumptionState? {
        guard !ticket.isEmpty else { return nil }
        var blob = previous ?? ResumptionBlob()
        blob.host = host
        blob.port = port
        blob.alpn = alpn
        blob.lastTransport = path == .tcp ? "tcp" : "quic"
        blob.createdAt = UInt64(now.timeIntervalSince1970)
        blob.expiresAt = blob.createdAt + UInt64(ResumptionState.lifetime)
        if path == .quic {
            blob.quicTicket = ticket
            blob.quicTransportParameters = transportParameters
            blob.quicToken = token
            if quicVersion != 0 { blob.quicVersion = quicVersion }
        } else {
            blob.tcpTicket = ticket
            blob.tcpTransportParameters = transportParameters
        }
        if smoothedRTT > 0 { blob.smoothedRTT = smoothedRTT }
        return ResumptionState(blob: blob)
    }
}
