import TransportCore
import TransportIO

/// Early data and resumption, for both transports: the early messages and datagrams of a woken client, what the
/// handshake resumed, and the state the next connection needs.
extension ConnectionDriver {
    /// The latest state to save (nil until the server sent a ticket).
    var resumptionState: ResumptionState? { resumptionStates.current }
    /// How this connection used saved state.
    var resumptionStatus: ResumptionStatus { resumption.status }
    /// The stream the early messages went on.
    var earlyStream: IncomingStreamHandle? { resumption.earlyStream }
    /// Why saved state was ignored or only partly used.
    var resumptionDiagnostic: String? { resumption.diagnostic }

    /// Client, before the first packet: sends the replay-safe prefix of `messages` on a new stream, which makes it
    /// 0-RTT when the resumed session allows (QMux's core already sent it with its ClientHello), and queues a
    /// woken talker's first frames the same way; the rest waits for the handshake (before it the server's
    /// DATAGRAM support is unknown). A frame the core refuses is counted as rejected.
    func startEarly(messages: [EarlyMessage], datagrams: [[UInt8]], diagnostic: String?) {
        resumption.diagnostic = diagnostic ?? core.resumptionDiagnostic
        early.pendingMessages = messages
        if let id = core.earlyStreamID {
            openEarlyStream(id)
            early.pendingMessages = Array(messages.drop { $0.replaySafe })
        } else if core.acceptsEarlyWrites {
            let safe = Array(messages.prefix { $0.replaySafe })
            if !safe.isEmpty, let id = try? core.openBidirectionalStream() {
                openEarlyStream(id)
                queueEarly(safe, on: id)
                early.pendingMessages = Array(messages.dropFirst(safe.count))
            }
        }
        if core.acceptsEarlyWrites {
            for payload in datagrams { core.sendEarlyDatagram(payload) }
        } else {
            early.pendingDatagrams = datagrams
        }
    }

    /// Client, handshake done: resumption status, the early messages and datagrams still pending (the messages
    /// on the early stream, opening one when none went early), and the state for the next connection.
    func clientHandshakeCompleted() {
        resumption.status = ResumptionStatus(resumed: core.isResumed, earlyDataAccepted: core.earlyDataAccepted)
        if !early.pendingMessages.isEmpty {
            if early.streamID == nil, let opened = try? core.openBidirectionalStream() { openEarlyStream(opened) }
            if let id = early.streamID { queueEarly(early.pendingMessages, on: id) }
            early.pendingMessages.removeAll()
        }
        for payload in early.pendingDatagrams { core.sendEarlyDatagram(payload) }
        early.pendingDatagrams.removeAll()
        tracker?.transportParameters = core.encodedPeerTransportParameters
        refreshResumptionState()
    }

    /// Server: what the client's ClientHello resumed, for `TransportConnection.resumption`.
    func serverSawResumption() {
        resumption.status = ResumptionStatus(
            serverResumed: core.isResumed, acceptedEarlyData: core.acceptedEarlyData)
    }

    /// Client: publishes the state the next connection needs, once a ticket arrived.
    func refreshResumptionState() {
        guard var measured = tracker else { return }
        pump.measure(into: &measured)
        tracker = measured
        guard let state = measured.state() else { return }
        resumptionStates.publish(state)
    }

    /// Calls `onHandshakeResult` once.
    func reportHandshake(_ result: Result<Void, TransportError>) {
        onHandshakeResult?(result)
        onHandshakeResult = nil
    }

    /// Client: the early messages get stream `id`, readable as `earlyStream`.
    private func openEarlyStream(_ id: Int64) {
        early.streamID = id
        resumption.earlyStream = sinks.openStream(id)
    }

    /// Client: queues `messages`, framed, on the early stream `id`.
    private func queueEarly(_ messages: [EarlyMessage], on id: Int64) {
        for message in messages { try? core.queue(stream: id, MessageFraming.frame(message.bytes), fin: false) }
    }
}
