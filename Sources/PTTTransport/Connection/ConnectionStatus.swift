/// The life of a connection, in a form an app can map onto PushToTalk's service status.
public enum ConnectionStatus: Hashable, Sendable, CustomStringConvertible {
    /// The handshake is in progress.
    case connecting
    /// The handshake completed; streams and datagrams flow.
    case ready
    /// The connection ended; this is always the last status.
    case closed(CloseReason)

    /// `connecting`, `ready` or `closed (<reason>)`.
    public var description: String {
        switch self {
        case .connecting: return "connecting"
        case .ready: return "ready"
        case .closed(let reason): return "closed (\(reason))"
        }
    }
}

/// Which transport a connection runs on.
public enum TransportPath: String, Hashable, Sendable, CustomStringConvertible {
    /// QUIC v1 over UDP.
    case quic
    /// QMux (QUIC frames over TLS 1.3) over TCP: the fallback when UDP is blocked.
    case tcp

    /// `QUIC` or `TCP (QMux)`.
    public var description: String {
        switch self {
        case .quic: return "QUIC"
        case .tcp: return "TCP (QMux)"
        }
    }
}
