import PTTTransport

/// Judges a QMux cell of moq-dev's client against our relay from what the bridge read on the wire, what their
/// binding reported, and what our relay saw.
struct MoqJudgement {
    let run: MoqClientRun
    let relayPaths: [TransportPath]
    let relayEnd: String

    func judge(_ testCase: MatrixCase, direct: MoqClientRun?) -> Outcome {
        guard let theirs = run.client, let ours = run.server, theirs.records > 0 else {
            return .fail("the bridge saw no QMux from their client: \(run.bridgeError ?? run.connect.error ?? "?")")
        }
        switch testCase {
        case .qmuxStream: return stream(theirs, ours)
        case .qmuxDatagram: return datagram(theirs, ours)
        default: return handshake(theirs, ours, direct: direct)
        }
    }

    /// QMux errors on the wire: a transport CONNECTION_CLOSE from either side, or a draft rule the bridge saw
    /// broken.
    private func qmuxErrors(_ theirs: MoqWire, _ ours: MoqWire) -> [String] {
        var errors: [String] = []
        if let close = theirs.close, close.isTransport { errors.append("theirs: \(close.summary)") }
        if let close = ours.close, close.isTransport { errors.append("ours: \(close.summary)") }
        errors += theirs.violations.map { "theirs: \($0)" } + ours.violations.map { "ours: \($0)" }
        return errors
    }

    private var bridge: String {
        guard let tls = run.tls else { return "through the bridge" }
        return "through the bridge (\(tls.version), ALPN \(tls.alpn ?? "none") to our relay)"
    }

    /// How their side ended: their binding's error and the last frames and close they sent.
    private func theirEnd(_ theirs: MoqWire) -> String {
        let binding =
            run.connect.ok
            ? "their session opened"
            : "their MoQ layer gave up (\(run.connect.moqError.map { "\($0.kind): \($0.message)" } ?? run.connect.error ?? "?"))"
        let resets = theirs.streams.sorted { $0.key < $1.key }.compactMap { id, stream -> String? in
            guard let reset = stream.reset else { return nil }
            return "RESET_STREAM \(id) code \(reset.code)"
                + (stream.stopSending.map { ", STOP_SENDING code \($0)" } ?? "")
        }
        let close = theirs.close?.summary ?? "no CONNECTION_CLOSE, TCP \(theirs.end)"
        return ([binding] + resets + [close]).joined(separator: "; ")
    }

    private func parameters(_ wire: MoqWire) -> String {
        let names = wire.transportParameters?.count ?? 0
        let record = wire.parameter("max_record_size").map { "max_record_size \($0)" } ?? "max_record_size absent"
        let datagram =
            wire.parameter("max_datagram_frame_size").map { "max_datagram_frame_size \($0)" }
            ?? "no max_datagram_frame_size"
        let idle = wire.parameter("max_idle_timeout").map { "max_idle_timeout \($0) ms" } ?? "no idle timeout"
        let protocols = wire.applicationProtocols.map {
            " + in-band application_protocols [\($0.first ?? "")…\($0.last ?? "")] (\($0.count))"
        }
        return "\(names) parameters (\(record), \(datagram), \(idle))\(protocols ?? "")"
    }

    private func handshake(_ theirs: MoqWire, _ ours: MoqWire, direct: MoqClientRun?) -> Outcome {
        let errors = qmuxErrors(theirs, ours)
        let firstFrames = theirs.firstFrame == "QX_TRANSPORT_PARAMETERS" && ours.firstFrame == "QX_TRANSPORT_PARAMETERS"
        // Stream data from them needs our parameters' credit (draft §4.2): it shows they processed ours.
        let usedOurs = (theirs.frames["STREAM"] ?? 0) > 0
        // Their QX_PING requests (one a second) and our responses: every response echoes a request's sequence
        // number, and every request but the last (which may cross the close) was answered, by its own response or
        // a later one (§4.3 lets requests that arrive together be answered once, with the largest number).
        let answered =
            Set(ours.pongs).isSubset(of: Set(theirs.pings))
            && theirs.pings.dropLast().allSatisfy { ping in ours.pongs.contains { $0 >= ping } }
        var figure =
            "\(bridge): QX_TRANSPORT_PARAMETERS first both ways; theirs \(parameters(theirs)); ours "
            + "\(parameters(ours)); their STREAM frames then used our credit; their QX_PING requests "
            + "\(theirs.pings), our responses \(ours.pongs); our relay: \(relayPaths.map(\.rawValue)) handshake(s), "
            + "ended \(relayEnd); their end: \(theirEnd(theirs))"
        if let direct {
            figure +=
                ". Direct plaintext tcp:// to our TLS port: "
                + (direct.connect.ok ? "a session opened (unexpected)" : "\(direct.connect.error ?? "failed")")
                + ", and the relay served the bridged connection after it"
        }
        if !errors.isEmpty { figure += ". QMux errors: \(errors.joined(separator: "; "))" }
        let directRefused = direct.map { !$0.connect.ok } ?? true
        return MatrixCell.judged(
            firstFrames && usedOurs && answered && relayPaths == [.tcp] && errors.isEmpty && directRefused, figure)
    }

    private func stream(_ theirs: MoqWire, _ ours: MoqWire) -> Outcome {
        let errors = qmuxErrors(theirs, ours)
        guard let echo = run.echo?.first(where: { $0.sent > 0 }) else {
            return .fail("their client opened no bidirectional stream with data; \(theirEnd(theirs))")
        }
        var figure =
            "\(bridge): their client's bidirectional stream \(echo.stream): \(echo.sent) bytes, \(echo.echoed) "
            + "echoed \(echo.identical ? "identical" : "different"), offsets in order both ways (§4.1); then "
            + "\(theirEnd(theirs)); our relay ended \(relayEnd)"
        if !errors.isEmpty { figure += ". QMux errors: \(errors.joined(separator: "; "))" }
        return MatrixCell.judged(echo.identical && errors.isEmpty, figure)
    }

    private func datagram(_ theirs: MoqWire, _ ours: MoqWire) -> Outcome {
        guard let sent = ours.datagrams.first else {
            return .fail("our relay's DATAGRAM never reached the wire; theirs \(parameters(theirs))")
        }
        let errors = qmuxErrors(theirs, ours)
        let figure =
            "\(bridge): max_datagram_frame_size theirs \(theirs.parameter("max_datagram_frame_size") ?? 0), ours "
            + "\(ours.parameter("max_datagram_frame_size") ?? 0); our DATAGRAM (type \(sent.type), \(sent.bytes) bytes) "
            + (errors.isEmpty ? "taken by their QMux with no error" : "refused: \(errors.joined(separator: "; "))")
            + "; they sent \(theirs.datagrams.count). moq-ffi exposes datagrams only as MoQ track objects "
            + "(MoqTrackProducer.append_datagram, MoqTrackConsumer.recv_datagram), which need a MoQ peer, so no "
            + "datagram of theirs can be sent to or echoed by our relay"
        return errors.isEmpty ? .unsupported(figure) : .fail(figure)
    }
}
