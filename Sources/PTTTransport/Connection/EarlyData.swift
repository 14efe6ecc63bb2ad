import TransportCore

/// What a connection keeps of data sent or received before its handshake completed: the client's early messages
/// and datagrams still to send, the stream the early messages went on, and the datagrams a server in 0.5-RTT mode
/// holds for the handshake's end. Loop-confined, part of `ConnectionDriver`.
struct EarlyData {
    /// Client: early messages still to send once the handshake completes.
    var pendingMessages: [EarlyMessage] = []
    /// Client: the stream the early messages go on (nil until one was opened).
    var streamID: Int64?
    /// Client: early datagrams waiting for the handshake (they could not ride in the first flight).
    var pendingDatagrams: [[UInt8]] = []
    /// Server in 0.5-RTT mode: datagrams that arrived in 0-RTT wait until the handshake completes. When false,
    /// early datagrams go to the application at once (`EarlyDataPolicy.deliverEarlyDatagrams`).
    var holdsDatagrams = false
    private var held: [Datagram] = []

    /// Holds `datagram` when the policy says so and the handshake is not done: true when held (or dropped, past
    /// 64 held), false when it is the application's now.
    mutating func hold(_ datagram: Datagram, handshakeCompleted: Bool) -> Bool {
        guard holdsDatagrams && !handshakeCompleted else { return false }
        if held.count < 64 { held.append(datagram) }
        return true
    }

    /// The held datagrams, in order, once the handshake completed.
    mutating func takeHeldDatagrams() -> [Datagram] {
        defer { held.removeAll() }
        return held
    }
}
