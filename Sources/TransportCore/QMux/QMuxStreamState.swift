/// QUIC stream IDs (RFC 9000 §2.1): bit 0 is the initiator (0 client, 1 server), bit 1 the direction
/// (0 bidirectional, 2 unidirectional), the rest the per-type index.
enum QMuxStreamID {
    static func isClientInitiated(_ id: UInt64) -> Bool { id & 0x01 == 0 }
    static func isBidirectional(_ id: UInt64) -> Bool { id & 0x02 == 0 }
    static func index(_ id: UInt64) -> UInt64 { id >> 2 }
    static func make(index: UInt64, clientInitiated: Bool, bidirectional: Bool) -> UInt64 {
        index << 2 | (clientInitiated ? 0 : 1) | (bidirectional ? 0 : 2)
    }
}

/// The sending part of a stream (RFC 9000 §3.1). "Acknowledged" means "handed to the transport" in QMux (§4),
/// so the part is finished once FIN or RESET_STREAM is emitted.
struct QMuxSendHalf {
    /// The peer's limit for this stream's offset (initial_max_stream_data_* then MAX_STREAM_DATA).
    var maxData: UInt64
    /// Bytes emitted in STREAM frames so far: the next offset, and the final size once FIN goes out.
    var offset: UInt64 = 0
    /// Written by the application, not yet emitted.
    private(set) var queue: [UInt8] = []
    private var queueStart = 0
    var finQueued = false
    var finSent = false
    var resetSent = false
    /// The limit a STREAM_DATA_BLOCKED was last sent for (sent once per limit).
    var blockedReportedAt: UInt64?

    init(maxData: UInt64) { self.maxData = maxData }

    var queuedCount: Int { queue.count - queueStart }
    var isFinished: Bool { finSent || resetSent }
    /// Something to emit: data, or a FIN not yet sent.
    var hasPending: Bool { !isFinished && (queuedCount > 0 || finQueued) }

    /// Appends `data`; the queue grows by a quarter beyond what it needs, not by doubling, so a connection's
    /// queued bytes (`TCPConnectionBudget`) stay close to what they hold.
    mutating func enqueue(_ data: [UInt8]) {
        if queueStart > 0 && queueStart >= queue.count / 2 {
            queue.removeSubrange(0..<queueStart)
            queueStart = 0
        }
        let needed = queue.count + data.count
        if needed > queue.capacity { queue.reserveCapacity(needed + needed / 4) }
        queue.append(contentsOf: data)
    }

    /// Removes and returns up to `count` queued bytes.
    mutating func dequeue(_ count: Int) -> [UInt8] {
        let end = queueStart + min(count, queuedCount)
        let chunk = Array(queue[queueStart..<end])
        queueStart = end
        if queueStart == queue.count {  // drained: the capacity goes too (a peer without credit made it grow)
            queue = []
            queueStart = 0
        }
        return chunk
    }

    mutating func discardQueue() {
        queue = []
        queueStart = 0
    }
}

/// The receiving part of a stream (RFC 9000 §3.2), with its flow-control window (§4.1).
struct QMuxReceiveHalf {
    /// The limit advertised to the peer (initial_max_stream_data_* then MAX_STREAM_DATA).
    var maxData: UInt64
    /// The window kept open ahead of consumption.
    let window: UInt64
    /// The next offset expected: QMux STREAM frames arrive in order (§4.1), so this is also the highest.
    var offset: UInt64 = 0
    var finalSize: UInt64?
    var resetReceived = false
    /// Bytes the application reported consumed.
    var consumed: UInt64 = 0
    var stopSendingSent = false

    init(window: UInt64) {
        self.maxData = window
        self.window = window
    }

    /// All data (or the reset) has arrived: no more credit is needed.
    var isFinished: Bool { resetReceived || finalSize.map { offset == $0 } == true }
}

/// One stream's state. Unidirectional streams have only the half that applies to this endpoint.
struct QMuxStreamState {
    let id: UInt64
    var send: QMuxSendHalf?
    var receive: QMuxReceiveHalf?

    /// Both parts are finished: the stream can be forgotten.
    var isClosed: Bool { (send?.isFinished ?? true) && (receive?.isFinished ?? true) }
}
