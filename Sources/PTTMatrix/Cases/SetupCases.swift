import Foundation
import NetworkEmulation
import PTTTransport
import TransportIO

/// The cases about connection setup, judged from the cleartext long headers the path saw (`QUICWireTally`) and
/// from the endpoints' results.
enum SetupCases {
    static func handshake(_ run: CaseRun) async throws -> Outcome {
        let visits = try await run.oneVisit()
        let wire = run.path.network.wire
        return MatrixCell.judged(
            visits.allSatisfy(\.ok) && wire.handshakes == 1 && wire.retryTokens.isEmpty,
            "\(CaseRun.describe(visits)); wire: \(wire.handshakes) handshake, \(wire.retryTokens.count) Retry")
    }

    /// The Retry, its token reused, and (from tshark's decryption of the Initials) packet numbers that carry on.
    static func retry(_ run: CaseRun) async throws -> Outcome {
        let capture = run.captureFile("retry")
        defer { try? FileManager.default.removeItem(atPath: capture) }
        try run.path.network.capture(to: capture)
        let server = try await run.startServer(adjust: { $0.requireRetry = true }, aioquicArguments: ["--retry"])
        let visits = try await run.using(server) {
            try await run.visits(server)
        }
        let wire = run.path.network.wire
        let numbers = try await Tshark.initialPacketNumbersAroundRetry(
            capture: capture, client: EmulatedNetwork.clientAddress)
        let continued = numbers.map { ($0.after.min() ?? -1) > ($0.before.max() ?? -1) && !$0.after.isEmpty }
        let packetNumbers =
            numbers.map {
                "client Initial packet numbers \($0.before.map(String.init).joined(separator: ",")) before the "
                    + "Retry, \($0.after.map(String.init).joined(separator: ",")) after (tshark)"
            } ?? "packet numbers not checked (\(Tshark.available ? "tshark saw no Retry" : "tshark is not installed"))"
        return MatrixCell.judged(
            visits.allSatisfy(\.ok) && wire.handshakes == 1 && !wire.retryTokens.isEmpty
                && wire.clientInitialsWithRetryToken > 0 && continued != false,
            "\(CaseRun.describe(visits)); wire: \(wire.retryTokens.count) Retry, its token in "
                + "\(wire.clientInitialsWithRetryToken) client Initial(s), \(wire.handshakes) handshake; "
                + packetNumbers)
    }

    /// With the long chain, so a Certificate message (over 9 KB) cannot hide in the padding of a server's first
    /// datagram: the resumed handshake's Handshake packets must stay below the chain's size.
    static func resumption(_ run: CaseRun) async throws -> Outcome {
        let chain = try await CertificateChain.long(run.options)
        let server = try await run.startServer(certificate: chain)
        let visits = try await run.using(server) {
            try await run.visits(server, count: 2, resume: true)
        }
        let wire = run.path.network.wire
        let bytes = wire.serverConnectionIDs.map { wire.serverHandshakeBytes[$0] ?? 0 }
        let certificates = CertificateChain.derBytes(chain.chain)
        let noCertificate = bytes.count == 2 && bytes[1] < certificates && bytes[0] > certificates
        return MatrixCell.judged(
            visits.allSatisfy(\.ok) && visits.last?.resumed == true && wire.handshakes == 2 && noCertificate,
            "\(CaseRun.describe(visits)), 2nd resumed: \(visits.last?.resumed == true); wire: "
                + "\(wire.handshakes) handshakes, server Handshake bytes \(bytes.map(String.init).joined(separator: " then ")) "
                + "(a Certificate would carry the chain's \(certificates) bytes)")
    }

    static func zerortt(_ run: CaseRun) async throws -> Outcome {
        let server = try await run.startServer()
        let visits = try await run.using(server) {
            try await run.visits(server, count: 2, resume: true, early: true)
        }
        let wire = run.path.network.wire
        return MatrixCell.judged(
            visits.allSatisfy(\.ok) && visits.last?.earlyAccepted == true && wire.handshakes == 2
                && wire.clientZeroRTTBytes > 0,
            "\(CaseRun.describe(visits)), 0-RTT accepted: \(visits.last?.earlyAccepted == true); wire: "
                + "\(wire.handshakes) handshakes, \(wire.clientZeroRTTBytes) bytes of 0-RTT packets")
    }

    /// A client restricted to TLS_CHACHA20_POLY1305_SHA256; tshark reads the suites its ClientHello offered.
    static func chacha20(_ run: CaseRun) async throws -> Outcome {
        let capture = run.captureFile("chacha20")
        defer { try? FileManager.default.removeItem(atPath: capture) }
        try run.path.network.capture(to: capture)
        let visits = try await run.oneVisit(chacha20Only: true)
        let wire = run.path.network.wire
        // Once in about ten loaded CI runs tshark decoded no ClientHello from a capture that held the handshake
        // (an empty field): that read judges nothing, as when tshark is missing; any suite it does read is judged.
        let offered = try await Tshark.offeredCipherSuites(capture: capture)?.filter { !$0.isEmpty }
        let suites =
            offered.map {
                $0.isEmpty
                    ? "tshark decoded no ClientHello from the capture"
                    : "the ClientHello offered \($0.sorted().joined(separator: ","))"
            } ?? "tshark is not installed: the ClientHello was not read"
        return MatrixCell.judged(
            visits.allSatisfy(\.ok) && wire.handshakes == 1 && (offered.map { $0.isEmpty || $0 == ["0x1303"] } ?? true),
            "\(CaseRun.describe(visits)) with a client restricted to TLS_CHACHA20_POLY1305_SHA256 (0x1303); wire: "
                + "\(wire.handshakes) handshake, \(suites) (tshark)")
    }

    static func longrtt(_ run: CaseRun) async throws -> Outcome {
        let server = try await run.startServer()
        let visits = try await run.using(server) {
            try await run.visits(server, waitForTicket: false, handshakeTimeout: 45)
        }
        let wire = run.path.network.wire
        return MatrixCell.judged(
            visits.allSatisfy(\.ok) && wire.handshakes == 1 && wire.clientInitials >= 2,
            "\(CaseRun.describe(visits)) at 750 ms one way; wire: \(wire.clientInitials) client Initials "
                + "(the first retransmitted on PTO), \(wire.handshakes) handshake")
    }

    static func ipv6(_ run: CaseRun) async throws -> Outcome {
        let visits = try await run.oneVisit()
        let counters = run.path.network.counters
        return MatrixCell.judged(
            visits.allSatisfy(\.ok) && counters.serverToClient.udp4 == 0 && counters.serverToClient.udp6 > 0,
            "\(CaseRun.describe(visits)); wire: server sent \(counters.serverToClient.udp6) UDP/IPv6 and "
                + "\(counters.serverToClient.udp4) UDP/IPv4 datagrams")
    }

    static func amplificationlimit(_ run: CaseRun) async throws -> Outcome {
        let chain = try await CertificateChain.long(run.options)
        // The relay gets the case's 60 s too: six lost datagrams can cost the client's backoff past the default 10 s.
        let server = try await run.startServer(certificate: chain, adjust: { $0.handshakeTimeout = .seconds(60) })
        run.path.network.impair(Impairments(dropClientDatagrams: Set(2...7)))
        let visits = try await run.using(server) {
            try await run.visits(server, waitForTicket: false, handshakeTimeout: 60)
        }
        let wire = run.path.network.wire
        let handshakeBytes = wire.serverConnectionIDs.first.flatMap { wire.serverHandshakeBytes[$0] } ?? 0
        let ratio = Double(wire.serverBytesBeforeValidation) / Double(max(1, wire.clientBytesBeforeValidation))
        return MatrixCell.judged(
            visits.allSatisfy(\.ok) && wire.serverBytesBeforeValidation <= 3 * wire.clientBytesBeforeValidation
                && handshakeBytes >= 7_500 && wire.versionNegotiations == 0,
            "\(CaseRun.describe(visits)); wire: server \(wire.serverBytesBeforeValidation) B for client "
                + "\(wire.clientBytesBeforeValidation) B before validation = \(String(format: "%.2f", ratio))x "
                + "(limit 3x), 9-certificate chain in \(handshakeBytes) B of Handshake packets, client datagrams 2-7 dropped"
        )
    }

    /// handshakeloss and handshakecorruption: N connections at 30 % per direction, bursts of at most 3. Client and
    /// relay both give a handshake the case's 60 s (the relay's default 10 s would abandon the slowest ones: a cold
    /// client's backoff starts from the 333 ms initial RTT).
    static func lossyHandshakes(_ run: CaseRun, corruption: Bool) async throws -> Outcome {
        let server = try await run.startServer(adjust: { $0.handshakeTimeout = .seconds(60) })
        run.path.network.impair(Impairments(maximumBurst: 3, corruptionRate: corruption ? 0.3 : 0))
        let count = run.options.connections
        let visits = try await run.using(server) {
            try await run.visits(
                server, count: count, parallel: run.pairing == .aioquicClient ? 2 : 5, waitForTicket: false,
                handshakeTimeout: 60)
        }
        let wire = run.path.network.wire
        let counters = run.path.network.counters
        let impaired = corruption ? "\(counters.corrupted) corrupted" : "\(counters.lost) lost"
        return MatrixCell.judged(
            visits.allSatisfy(\.ok) && wire.handshakes == count,
            "\(CaseRun.describe(visits)) (client and relay handshake limit 60 s); wire: \(wire.handshakes) handshakes for \(count) connections, "
                + "\(impaired) of \(counters.clientToServer.packets + counters.serverToClient.packets) packets")
    }

    static func udpBlocked(_ run: CaseRun) async throws -> Outcome {
        guard run.pairing == .ours else {
            return .unsupported("aioquic speaks QUIC only; the fallback is QMux over TLS over TCP")
        }
        let server = try await run.startServer(tcp: true)
        run.path.network.dropUDP = true
        let visits = try await run.using(server) {
            try await run.visits(server, waitForTicket: false, fallback: .race())
        }
        let counters = run.path.network.counters
        return MatrixCell.judged(
            visits.allSatisfy { $0.ok && $0.transport == .tcp } && counters.filtered > 0,
            "\(CaseRun.describe(visits)) over \(visits.first?.transport.rawValue ?? "nothing"); wire: "
                + "\(counters.filtered) UDP datagrams dropped by the filter")
    }

    /// A 3 s call with our client (ngtcp2 marks ECT once the handshake is done), two connections with aioquic's.
    static func ecn(_ run: CaseRun) async throws -> Outcome {
        if run.pairing != .aioquicClient {
            let capture = run.captureFile("ecn")
            let keyLog = capture + ".keys"
            defer {
                try? FileManager.default.removeItem(atPath: capture)
                try? FileManager.default.removeItem(atPath: keyLog)
            }
            try run.path.network.capture(to: capture)
            let (report, _, _) = try await CallCases.call(run, seconds: 3, keyLogFile: keyLog)
            let counts = try await Tshark.ackECNCounts(
                capture: capture, keyLog: keyLog, client: EmulatedNetwork.clientAddress)
            return judgeECN(
                run, "3 s call, \(report.framesEchoed)/\(report.framesSent) frames echoed", ok: report.survived,
                ackCounts: counts)
        }
        let server = try await run.startServer()
        let visits = try await run.using(server) {
            try await run.visits(server, count: 2)
        }
        return judgeECN(run, CaseRun.describe(visits), ok: visits.allSatisfy(\.ok), ackCounts: nil)
    }

    /// `ackCounts`: whether ACK frames with ECN counts came from the client and from the server (tshark, with the
    /// client's key log: the frames are encrypted), nil when they could not be read.
    private static func judgeECN(
        _ run: CaseRun, _ endpoints: String, ok: Bool, ackCounts: (client: Bool, server: Bool)?
    ) -> Outcome {
        let counters = run.path.network.counters
        let c = counters.clientToServer
        let s = counters.serverToClient
        let figure =
            "\(endpoints); wire: ECT on \(c.ect) of \(c.udp4 + c.udp6) client and \(s.ect) of "
            + "\(s.udp4 + s.udp6) server datagrams, \(c.ce + s.ce) CE; "
            + (ackCounts.map {
                "ACK frames with ECN counts from the client: \($0.client), from the server: \($0.server)"
            }
                ?? "ACK frames' ECN counts not read (encrypted; no key log or no tshark)")
        if run.pairing != .ours && (run.pairing == .aioquicClient ? c.ect : s.ect) == 0 {
            return .unsupported("aioquic sets no ECN codepoint; " + figure)
        }
        let countsOK = ackCounts.map { $0.client && $0.server } ?? false
        return MatrixCell.judged(ok && c.ect > 0 && s.ect > 0 && c.ce + s.ce == 0 && countsOK, figure)
    }
}
