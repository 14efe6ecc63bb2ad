import TransportCore
import TransportIO

/// The events a driver handles the same way on both transports, and the hooks for the rest.
protocol ConnectionEventHandling: ConnectionDriving {
    /// Client, handshake done: resumption status, pending early messages and data, the tracker.
    func clientHandshakeCompleted()
    /// The handshake completed; runs before the application hears of it.
    func handshakeDidComplete()
    /// The connection ended; runs before waiting senders fail and the application hears of it.
    func connectionWillFinish(_ reason: CloseReason)
    /// Stream data, writable streams, datagrams and path changes: what each transport handles its own way.
    func handleTransportEvent(_ event: QUICEvent)
}

extension ConnectionEventHandling {
    /// Hands every event the core emitted to the application, in order (loop only).
    func drainEvents() {
        while let event = core.nextEvent() {
            switch event {
            case .handshakeCompleted:
                outbound.ready(maxPayload: core.maxDatagramPayloadSize)
                if core.isClient { clientHandshakeCompleted() } else { serverSawResumption() }
                handshakeDidComplete()
                sinks.ready()
                reportHandshake(.success(()))
            case .streamOpened(let id):
                sinks.openStream(id, peerOpened: true)
            case .streamReset(let id, let code):
                sinks.peerReset(id, code: code)
            case .stopSending(let id, let code):
                sinks.peerStopSending(id, code: code)
            case .streamClosed(let id):
                sinks.streamClosed(id)
            case .streamsAvailable:
                retryPendingOpens()
            case .sessionTicket(let ticket):
                tracker?.ticket = ticket
                refreshResumptionState()
            case .newToken(let token):
                tracker?.token = token
                refreshResumptionState()
            case .earlyDataRejected:
                break
            case .closed(let reason):
                connectionWillFinish(reason)
                outbound.fail(reason.error)
                reportHandshake(.failure(reason.error))
                sinks.finish(reason)
            case .streamData, .streamWritable, .datagram, .pathValidated:
                handleTransportEvent(event)
            }
        }
    }
}
