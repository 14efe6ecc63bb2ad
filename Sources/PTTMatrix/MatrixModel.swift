/// The matrix's cases, in the order they run and print.
package enum MatrixCase: String, CaseIterable, Sendable, Codable {
    case handshake, retry, resumption, zerortt, chacha20, amplificationlimit, handshakeloss, handshakecorruption
    case transferloss, transfercorruption, blackhole, keyupdate, ecn, ipv6
    case rebindPort = "rebind-port"
    case rebindAddr = "rebind-addr"
    case connectionmigration
    case udpBlocked = "udp-blocked"
    case transfer, longrtt
    /// QUIC v2 (RFC 9369) by compatible version negotiation (RFC 9368): the client starts in v1 and offers v2.
    case v2
    /// QMux (draft-ietf-quic-qmux-01) over TCP on loopback: the connection, both QX_TRANSPORT_PARAMETERS first.
    case qmuxHandshake = "qmux-handshake"
    /// QMux: a bidirectional stream the client opens, its bytes echoed back unchanged.
    case qmuxStream = "qmux-stream"
    /// QMux: a DATAGRAM frame (RFC 9221, draft-ietf-quic-qmux-01 §9.1) each way.
    case qmuxDatagram = "qmux-datagram"

    /// The cases that finish in seconds on the emulated path, for CI.
    package static let quick: [MatrixCase] = [
        .handshake, .retry, .resumption, .zerortt, .chacha20, .amplificationlimit, .keyupdate, .handshakeloss, .v2,
    ]

    /// The QMux cases: they run on loopback (QMux rides on TCP, which needs no emulated path), in seconds.
    package static let qmux: [MatrixCase] = [.qmuxHandshake, .qmuxStream, .qmuxDatagram]

    /// Whether this is a QMux case.
    package var isQMux: Bool { Self.qmux.contains(self) }
}

/// Who plays the client and who the server.
package enum Pairing: String, CaseIterable, Sendable, Codable {
    /// Our client against our relay.
    case ours = "ours-ours"
    /// aioquic's client (Tests/Peers/aioquic_client.py) against our relay.
    case aioquicClient = "aioquic-ours"
    /// Our client against aioquic's echo server (Tests/Peers/aioquic_echo_server.py).
    case aioquicServer = "ours-aioquic"
    /// moq-dev's QMux client (the moq-ffi wheel, Tests/Peers/moq_qmux_peer.py) against our relay: QMux cases only.
    case moqClient = "moq-ours"
    /// Our client against moq-dev's QMux server: QMux cases only.
    case moqServer = "ours-moq"

    /// Whether aioquic plays one side.
    package var isAioquic: Bool { self == .aioquicClient || self == .aioquicServer }
    /// Whether moq-dev's implementation plays one side.
    package var isMoq: Bool { self == .moqClient || self == .moqServer }
}

/// A cell's outcome.
package enum Verdict: String, Sendable, Codable {
    case pass, fail, unsupported
}

/// One cell of the matrix: a case run by one pairing, with the figure that decided it.
package struct MatrixCell: Sendable, Codable {
    /// The case.
    package var testCase: MatrixCase
    /// The pairing.
    package var pairing: Pairing
    /// Pass, fail or unsupported.
    package var verdict: Verdict
    /// The figure (or the reason) that decided it.
    package var figure: String
    /// Wall-clock seconds the cell took.
    package var seconds: Double = 0

    /// A cell as judged.
    package init(testCase: MatrixCase, pairing: Pairing, verdict: Verdict, figure: String) {
        self.testCase = testCase
        self.pairing = pairing
        self.verdict = verdict
        self.figure = figure
    }

    enum CodingKeys: String, CodingKey {
        case testCase = "case"
        case pairing, verdict, figure, seconds
    }

    /// A verdict on `check`, with `figure` as the evidence.
    static func judged(_ check: Bool, _ figure: String) -> Outcome { Outcome(verdict: check ? .pass : .fail, figure) }
}

/// A verdict and its figure, before the cell knows its case and pairing.
struct Outcome: Sendable {
    var verdict: Verdict
    var figure: String

    init(verdict: Verdict, _ figure: String) {
        self.verdict = verdict
        self.figure = figure
    }

    static func unsupported(_ reason: String) -> Outcome { Outcome(verdict: .unsupported, reason) }
    static func fail(_ reason: String) -> Outcome { Outcome(verdict: .fail, reason) }
}

/// An error a case reports as its failure figure.
struct MatrixError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
