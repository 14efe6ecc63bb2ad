import TransportCore

/// What one transport's connections on one event loop did since the server started, kept on that loop by its
/// server driver and added up by ``TransportServer/relayMetrics()``: handshakes (full or resumed, and how long each
/// took) and the datagrams of the connections that already ended.
package struct RelayLoopMetrics: Sendable, Equatable {
    /// The upper bounds (seconds) of the handshake-time histogram's buckets, `+Inf` aside.
    package static let handshakeBuckets: [Double] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

    /// Handshakes completed with a full TLS handshake (certificate sent).
    package var handshakesFull: UInt64 = 0
    /// Handshakes completed by resuming a session ticket (1-RTT or 0-RTT).
    package var handshakesResumed: UInt64 = 0
    /// Handshakes that failed or timed out.
    package var handshakesFailed: UInt64 = 0
    /// Handshakes per bucket of `handshakeBuckets` (not cumulative; the last slot is `+Inf`).
    package var handshakeBucketCounts = [UInt64](repeating: 0, count: RelayLoopMetrics.handshakeBuckets.count + 1)
    /// Sum of the handshake times, in seconds.
    package var handshakeSecondsSum: Double = 0
    /// The datagrams of connections that ended (live ones are added at each scrape).
    package var endedDatagrams = DatagramTotals()

    package init() {}

    /// A handshake ended: `nanoseconds` from its first packet (or accept) to its result.
    mutating func handshake(succeeded: Bool, resumed: Bool, nanoseconds: UInt64) {
        guard succeeded else {
            handshakesFailed += 1
            return
        }
        if resumed { handshakesResumed += 1 } else { handshakesFull += 1 }
        let seconds = Double(nanoseconds) / 1e9
        handshakeSecondsSum += seconds
        let slot = Self.handshakeBuckets.firstIndex { seconds <= $0 } ?? Self.handshakeBuckets.count
        handshakeBucketCounts[slot] += 1
    }

    /// Adds `other` (another loop's) to these.
    mutating func add(_ other: RelayLoopMetrics) {
        handshakesFull += other.handshakesFull
        handshakesResumed += other.handshakesResumed
        handshakesFailed += other.handshakesFailed
        for slot in handshakeBucketCounts.indices { handshakeBucketCounts[slot] += other.handshakeBucketCounts[slot] }
        handshakeSecondsSum += other.handshakeSecondsSum
        endedDatagrams.add(other.endedDatagrams)
    }
}

/// Audio datagrams, in and out, and those dropped, by reason.
package struct DatagramTotals: Sendable, Equatable {
    package var received: UInt64 = 0
    package var sent: UInt64 = 0
    /// Received, dropped because the application did not read them in time (its receive buffer was full).
    package var droppedReceiveBuffer: UInt64 = 0
    /// Outbound, dropped before sending: their deadline passed or the send queue was full.
    package var droppedExpired: UInt64 = 0
    /// Sent and declared lost by the peer's acknowledgements.
    package var lost: UInt64 = 0
    /// Outbound, larger than the peer accepts: discarded.
    package var droppedTooLarge: UInt64 = 0

    package init() {}

    /// One connection's datagram counters added.
    mutating func add(_ statistics: ConnectionStatistics) {
        received += statistics.datagramsReceived
        sent += statistics.datagramsSent
        droppedReceiveBuffer += statistics.datagramsDropped
        droppedExpired += statistics.datagramsExpired
        lost += statistics.datagramsLost
        droppedTooLarge += statistics.datagramsRejected
    }

    /// One QUIC connection's datagram counters added (`QUICConnection.metricsSample`), as `add(_:)` of its
    /// statistics would.
    mutating func add(_ counters: QUICCounters, expired: UInt64, dropped: UInt64) {
        received += counters.datagramsReceived
        sent += counters.datagramsSent
        droppedReceiveBuffer += dropped
        droppedExpired += expired
        lost += counters.datagramsLost
        droppedTooLarge += counters.datagramsRejected
    }

    mutating func add(_ other: DatagramTotals) {
        received += other.received
        sent += other.sent
        droppedReceiveBuffer += other.droppedReceiveBuffer
        droppedExpired += other.droppedExpired
        lost += other.lost
        droppedTooLarge += other.droppedTooLarge
    }
}
