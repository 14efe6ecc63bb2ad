import PTTTransport

/// How `connect` ends a call: it finishes its message stream and waits for the relay to echo the end, so a relay
/// that died mid-call (killed, restarted, gone silent) is noticed instead of reported as a call with fewer echoes.
enum CallEnd {
    /// Finishes `stream` and waits for the relay's FIN. Throws the connection's close error when it ended first:
    /// `closedByPeer`, `idleTimeout` (nothing heard for the idle timeout), `connectionReset` (stateless reset).
    static func confirm(_ stream: TransportStream) async throws {
        try await stream.finish()
        while try await stream.nextChunk() != nil {}
        // The stream also ends (without an error) when the relay closes the connection with code 0: still a call
        // cut short.
        if case .closed(let reason) = stream.connection.status, !reason.isLocal { throw reason.error }
    }

    /// The one-line error for a call whose connection died: what the transport said, with how far the call got.
    /// `echoed` is nil when the datagram exchange itself failed (its count is then unknown).
    static func died(_ error: any Error, connection: TransportConnection, echoed: Int?, of sent: Int) -> any Error {
        guard let error = error as? TransportError else { return error }
        let progress = sent > 0 ? " (\(echoed.map { "\($0)" } ?? "?") of \(sent) datagrams echoed)" : ""
        return TransportError(
            error.code,
            "the connection to \(connection.remoteAddress) ended before the call finished\(progress): "
                + error.message,
            libraryCode: error.libraryCode, applicationErrorCode: error.applicationErrorCode,
            transportErrorCode: error.transportErrorCode)
    }
}

extension CloseReason {
    /// Whether this side closed the connection.
    fileprivate var isLocal: Bool {
        if case .local = self { return true }
        return false
    }
}
