import PTTTalkGroups
import PTTTransport

/// The relay's metrics in OpenMetrics text (the exposition format Prometheus scrapes), every family named in the
/// production article ("Running a relay in production"). Counters end in `_total`; the text ends with `# EOF`.
enum OpenMetricsText {
    static let contentType = "application/openmetrics-text; version=1.0.0; charset=utf-8"

    /// The text for `metrics` (nil: the listeners are not up yet: build information and readiness only), and the
    /// talk groups' families when the relay runs them (`serve --talk-groups`).
    static func render(_ metrics: RelayMetrics?, talkGroups: TalkGroupStatistics? = nil) -> String {
        var out = Writer()
        let revisions = LinkedLibraries.debianRevisions
        out.family("ptt_relay_build", "info", "The linked libraries and their Debian revisions")
        out.sample(
            "ptt_relay_build_info",
            [
                ("ngtcp2", LinkedLibraries.ngtcp2), ("ngtcp2_debian", revisions.ngtcp2),
                ("gnutls", LinkedLibraries.gnutls), ("gnutls_debian", revisions.gnutls),
            ], 1)
        out.family("ptt_relay_ready", "gauge", "1 when /readyz answers 200")
        let ready = metrics.map { !$0.draining && $0.storeAnswered != false } ?? false
        out.sample("ptt_relay_ready", [], ready ? 1 : 0)
        out.family("ptt_relay_draining", "gauge", "1 once a drain (SIGTERM) began")
        out.sample("ptt_relay_draining", [], metrics?.draining == true ? 1 : 0)
        guard let metrics else { return out.text + "# EOF\n" }

        out.family("ptt_relay_connections", "gauge", "Live connections by transport and QUIC version")
        for version in ["1", "2", "handshake"] {
            out.sample(
                "ptt_relay_connections", [("transport", "quic"), ("version", version)],
                Double(metrics.quicConnections[version] ?? 0))
        }
        out.sample(
            "ptt_relay_connections", [("transport", "tcp"), ("version", "qmux")], Double(metrics.tcpConnections))

        out.family("ptt_relay_handshakes", "counter", "Handshakes ended, by transport and kind")
        for transport in ["quic", "tcp"] {
            let counters = metrics.transports[transport] ?? .init()
            for (kind, value) in [
                ("full", counters.handshakesFull), ("resumed", counters.handshakesResumed),
                ("failed", counters.handshakesFailed),
            ] {
                out.sample("ptt_relay_handshakes_total", [("transport", transport), ("kind", kind)], Double(value))
            }
        }
        out.family("ptt_relay_handshake_seconds", "histogram", "Time from first packet (or accept) to handshake done")
        for transport in ["quic", "tcp"] {
            let counters = metrics.transports[transport] ?? .init()
            var cumulative: UInt64 = 0
            for (slot, bound) in RelayLoopMetrics.handshakeBuckets.enumerated() {
                cumulative += counters.handshakeBucketCounts[slot]
                out.sample(
                    "ptt_relay_handshake_seconds_bucket", [("transport", transport), ("le", "\(bound)")],
                    Double(cumulative))
            }
            cumulative += counters.handshakeBucketCounts.last ?? 0
            out.sample(
                "ptt_relay_handshake_seconds_bucket", [("transport", transport), ("le", "+Inf")], Double(cumulative))
            out.sample("ptt_relay_handshake_seconds_count", [("transport", transport)], Double(cumulative))
            out.sample("ptt_relay_handshake_seconds_sum", [("transport", transport)], counters.handshakeSecondsSum)
        }

        out.family("ptt_relay_reloads", "counter", "Reloads (SIGHUP), by result: ok, or failed (nothing changed)")
        out.sample("ptt_relay_reloads_total", [("result", "ok")], Double(metrics.reloads.succeeded))
        out.sample("ptt_relay_reloads_total", [("result", "failed")], Double(metrics.reloads.failed))

        let replay = metrics.antiReplay
        out.family("ptt_relay_zero_rtt_accepted", "counter", "0-RTT attempts accepted by the anti-replay store")
        out.sample("ptt_relay_zero_rtt_accepted_total", [], Double(replay.accepted))
        out.family("ptt_relay_zero_rtt_refused", "counter", "0-RTT attempts refused (1-RTT instead), by reason")
        for (reason, value) in [
            ("replay", replay.replaysRefused), ("store_unavailable", replay.refusedStoreUnavailable),
            ("over_budget", replay.refusedOverBudget), ("unknown_or_expired", replay.refusedUnknownOrExpired),
            ("store_memory_lost", replay.refusedStoreMemoryLost), ("not_held", replay.refusedNotHeld),
        ] {
            out.sample("ptt_relay_zero_rtt_refused_total", [("reason", reason)], Double(value))
        }
        out.family("ptt_relay_zero_rtt_disabled", "gauge", "1 when this relay refuses every 0-RTT attempt")
        out.sample("ptt_relay_zero_rtt_disabled", [], metrics.zeroRTTDisabled ? 1 : 0)
        out.family("ptt_relay_anti_replay_store_answered", "gauge", "1 once the shared store answered (-1: none)")
        out.sample(
            "ptt_relay_anti_replay_store_answered", [], metrics.storeAnswered.map { $0 ? 1 : 0 } ?? -1)

        out.family("ptt_relay_datagrams_received", "counter", "Audio datagrams received")
        out.family("ptt_relay_datagrams_sent", "counter", "Audio datagrams sent")
        out.family("ptt_relay_datagrams_lost", "counter", "Audio datagrams sent and declared lost")
        out.family("ptt_relay_datagrams_dropped", "counter", "Audio datagrams dropped, by reason")
        for transport in ["quic", "tcp"] {
            let datagrams = metrics.datagrams(transport)
            let label = [("transport", transport)]
            out.sample("ptt_relay_datagrams_received_total", label, Double(datagrams.received))
            out.sample("ptt_relay_datagrams_sent_total", label, Double(datagrams.sent))
            out.sample("ptt_relay_datagrams_lost_total", label, Double(datagrams.lost))
            for (reason, value) in [
                ("receive_buffer_full", datagrams.droppedReceiveBuffer), ("expired", datagrams.droppedExpired),
                ("too_large", datagrams.droppedTooLarge),
            ] {
                out.sample(
                    "ptt_relay_datagrams_dropped_total", label + [("reason", reason)], Double(value))
            }
        }

        out.family("ptt_relay_quic_packets_dropped", "counter", "UDP payloads dropped without an answer")
        out.sample("ptt_relay_quic_packets_dropped_total", [], Double(metrics.quicPacketsDropped))
        out.family("ptt_relay_quic_retries_sent", "counter", "Retry packets sent (address validation)")
        out.sample("ptt_relay_quic_retries_sent_total", [], Double(metrics.quicRetriesSent))
        let tcp = metrics.tcpAdmission
        out.family("ptt_relay_tcp_pending_handshakes", "gauge", "TCP connections whose handshake is not done")
        out.sample("ptt_relay_tcp_pending_handshakes", [], Double(tcp.pendingHandshakes))
        out.family("ptt_relay_tcp_refused", "counter", "TCP connections refused at accept, by reason")
        for (reason, value) in [
            ("source_pending_budget", tcp.refusedOverSourceBudget), ("source_limits", tcp.refusedOverSourceLimits),
            ("evicted_pending", tcp.evictedPendingHandshakes), ("descriptors", tcp.refusedForDescriptors),
            ("accept_failure", tcp.acceptFailures),
        ] {
            out.sample("ptt_relay_tcp_refused_total", [("reason", reason)], Double(value))
        }
        if let talkGroups { Self.talkGroups(talkGroups, into: &out) }
        return out.text + "# EOF\n"
    }

    /// The `ptt_relay_group_*` families: every label value written, zero or not, so a dashboard's series exist
    /// from the start.
    private static func talkGroups(_ groups: TalkGroupStatistics, into out: inout Writer) {
        out.family("ptt_relay_group_floor_events", "counter", "Floor events by kind, cause (denied, revoked) or reason")
        let name = "ptt_relay_group_floor_events_total"
        out.sample(name, [("event", "granted")], Double(groups.floorGranted))
        out.sample(name, [("event", "queued")], Double(groups.floorQueued))
        out.sample(name, [("event", "talk_time_warning")], Double(groups.talkTimeWarnings))
        for code in [1, 4, 5, 6, 7, 255] as [UInt8] {
            out.sample(name, [("event", "denied"), ("cause", "\(code)")], Double(groups.floorDenied[code] ?? 0))
        }
        for code in FloorRevokeCause.allCases.map(\.code) {
            out.sample(name, [("event", "revoked"), ("cause", "\(code)")], Double(groups.floorRevoked[code] ?? 0))
        }
        let reasons: [FloorReleaseReason] = [
            .released, .revoked, .idle, .left, .closed, .unresponsive, .preempted, .talkTimeExceeded,
        ]
        for reason in reasons.map(\.rawValue) {
            out.sample(
                name, [("event", "released"), ("reason", reason)], Double(groups.floorReleased[reason] ?? 0))
        }
        let wake = groups.wake
        out.family("ptt_relay_group_wake_hook_calls", "counter", "Bursts handed to the wake hook (--wake-exec)")
        out.sample("ptt_relay_group_wake_hook_calls_total", [], Double(wake.requests))
        out.family("ptt_relay_group_wake_hook_members", "counter", "Members in the wake hook's calls")
        out.sample("ptt_relay_group_wake_hook_members_total", [], Double(wake.members))
        out.family("ptt_relay_group_wake_hook_failures", "counter", "Wake hook calls that failed, by reason")
        for (reason, value) in [("failed", wake.failures), ("timeout", wake.timeouts), ("dropped", wake.dropped)] {
            out.sample("ptt_relay_group_wake_hook_failures_total", [("reason", reason)], Double(value))
        }
        out.family("ptt_relay_group_fanout_copies", "counter", "Audio frame copies handed to listeners")
        out.sample("ptt_relay_group_fanout_copies_total", [], Double(groups.fanOutCopies))
        out.family("ptt_relay_group_catch_up_frames", "counter", "Burst-buffer frames replayed to members catching up")
        out.sample("ptt_relay_group_catch_up_frames_total", [], Double(groups.catchUpFrames))
    }

    /// Each family's TYPE and HELP lines followed by its samples, in the order families were declared; a sample
    /// belongs to the declared family its name starts with (the longest such name).
    private struct Writer {
        private var families: [(name: String, lines: [String])] = []

        var text: String { families.map { $0.lines.joined() }.joined() }

        mutating func family(_ name: String, _ type: String, _ help: String) {
            families.append((name, ["# TYPE \(name) \(type)\n", "# HELP \(name) \(help)\n"]))
        }

        mutating func sample(_ name: String, _ labels: [(String, String)], _ value: Double) {
            let rendered =
                labels.isEmpty
                ? "" : "{" + labels.map { "\($0.0)=\"\(Self.escape($0.1))\"" }.joined(separator: ",") + "}"
            let number = value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
            let index = families.indices.filter { name.hasPrefix(families[$0].name) }
                .max { families[$0].name.count < families[$1].name.count }
            guard let index else { return }
            families[index].lines.append("\(name)\(rendered) \(number)\n")
        }

        private static func escape(_ value: String) -> String {
            var escaped = ""
            for character in value {
                switch character {
                case "\\": escaped += "\\\\"
                case "\"": escaped += "\\\""
                case "\n": escaped += "\\n"
                default: escaped.append(character)
                }
            }
            return escaped
        }
    }
}
