import PTTTransport

/// Which requests a relay acts on as soon as they arrive in 0-RTT, and which wait for the handshake. Sans-IO: the
/// caller passes what the transport knows of the connection.
///
/// - Replay-safe requests (`join`, `catchUp`) at once, always: acting twice changes nothing.
/// - A floor request at once when the transport accepted the flight's early data — which it does only after the
///   ticket's single-use claim in the anti-replay store succeeded, so this flight is the ticket's first and only
///   0-RTT delivery. A replayed flight has its early data refused (never decrypted, nothing delivered), and a store
///   that is down or slow refuses 0-RTT too (fail closed): the request is then sent again after the handshake and
///   handled as any other. A woken talker's grant thus leaves at 0.5-RTT, one round trip after it pressed the key.
/// - Everything else that arrives in 0-RTT (a release, a leave, or a floor request on a connection whose early data
///   was not accepted) waits until the handshake completed.
enum EarlyRequests {
    /// Whether `request`, which arrived in 0-RTT when `early`, is acted on before the handshake completed.
    /// `earlyDataAccepted`: the connection's early data was accepted (the anti-replay claim succeeded).
    static func actsAtOnce(_ request: TalkGroupMessage, early: Bool, earlyDataAccepted: Bool) -> Bool {
        guard early, !request.isReplaySafe else { return true }
        if case .requestFloor = request { return earlyDataAccepted }
        return false
    }

    /// Whether `connection`'s early data was accepted (known at 0.5-RTT, once its first early data arrived).
    static func earlyDataAccepted(_ connection: TransportConnection) -> Bool {
        connection.resumption == .resumed(earlyData: .accepted)
    }
}
