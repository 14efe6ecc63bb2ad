import TransportIO

/// A relay's counters at one moment, for its admin endpoint (`ptt-transport serve --admin`): connections by
/// transport and QUIC version, handshakes, datagrams, 0-RTT and anti-replay decisions, TCP admission, drain state.
/// Gathered by ``TransportServer/relayMetrics()`` from every event loop (one short task on each).
package struct RelayMetrics: Sendable {
    /// Live QUIC connections by version: "1", "2", or "handshake" while it has not completed.
    package var quicConnections: [String: Int] = [:]
    /// Live QMux-over-TCP connections.
    package var tcpConnections = 0
    /// Handshakes and the datagrams of ended connections, by transport ("quic", "tcp").
    package var transports: [String: RelayLoopMetrics] = ["quic": .init(), "tcp": .init()]
    /// The datagrams of live connections, by transport.
    package var liveDatagrams: [String: DatagramTotals] = ["quic": .init(), "tcp": .init()]
    /// UDP payloads the QUIC endpoint dropped without an answer (garbage, truncated, rate-limited, unknown).
    package var quicPacketsDropped: UInt64 = 0
    /// Retry packets sent (address validation).
    package var quicRetriesSent: UInt64 = 0
    /// The anti-replay store's decisions: 0-RTT accepted and refused by reason.
    package var antiReplay = AntiReplayStatistics()
    /// The TCP listener's admission counters.
    package var tcpAdmission = TCPAdmissionStatistics()
    /// Whether a drain began.
    package var draining = false
    /// Whether the configured shared store has answered at least once (nil: none configured).
    package var storeAnswered: Bool?
    /// Whether the server refuses 0-RTT whatever the store says (its GnuTLS lacks a fix, or early data is off).
    package var zeroRTTDisabled = false
    /// Reloads (SIGHUP) that took effect, and those that failed and changed nothing.
    package var reloads = (succeeded: UInt64(0), failed: UInt64(0))

    /// Datagrams of ended and live connections together, by transport.
    package func datagrams(_ transport: String) -> DatagramTotals {
        var total = transports[transport]?.endedDatagrams ?? .init()
        total.add(liveDatagrams[transport] ?? .init())
        return total
    }
}

extension TransportServer {
    /// Every counter of ``RelayMetrics``, gathered now from each event loop.
    package func relayMetrics() async -> RelayMetrics {
        var metrics = RelayMetrics()
        for (quic, tcp) in zip(quic, tcp) {
            let loop = try? await quic.loop.submit {
                (
                    quic.value.map {
                        ($0.metrics, $0.liveMetrics(), $0.endpoint.droppedPackets, $0.endpoint.retriesSent)
                    },
                    tcp.value.map { ($0.metrics, $0.liveDatagrams, $0.connectionCount) }
                )
            }
            if let (counters, live, dropped, retries) = loop?.0 {
                metrics.quicRetriesSent += retries
                metrics.transports["quic"]?.add(counters)
                for (version, count) in live.versions { metrics.quicConnections[version, default: 0] += count }
                metrics.liveDatagrams["quic"]?.add(live.datagrams)
                metrics.quicPacketsDropped += dropped
            }
            if let (counters, live, count) = loop?.1 {
                metrics.transports["tcp"]?.add(counters)
                metrics.liveDatagrams["tcp"]?.add(live)
                metrics.tcpConnections += count
            }
        }
        metrics.antiReplay = await antiReplayStatistics()
        metrics.tcpAdmission = await tcpAdmissionStatistics()
        metrics.draining = draining.withLock { $0 }
        metrics.storeAnswered = antiReplayStoreAnswered
        metrics.zeroRTTDisabled = zeroRTTRefusal != nil || !earlyDataEnabled
        metrics.reloads = reloads.withLock { $0 }
        return metrics
    }
}
