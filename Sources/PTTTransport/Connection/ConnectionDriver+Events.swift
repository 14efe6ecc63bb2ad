import TransportCore
import TransportIO

extension ConnectionDriver {
    /// Hands every event the core emitted to the application, in order (loop only). Both transports' cores emit
    /// the same events; what differs (a stream that can take more, a validated path) goes to the pump.
    func drainEvents() {
        while let event = core.nextEvent() {
            switch event {
            case .handshakeCompleted:
                outbound.ready(maxPayload: core.maxDatagramPayloadSize)
                if core.isClient { clientHandshakeCompleted() } else { serverSawResumption() }
                for datagram in early.takeHeldDatagrams() { sinks.deliver(datagram) }
                sinks.ready()
                reportHandshake(.success(()))
            case .streamOpened(let id):
                sinks.openStream(id, peerOpened: true)
            case .streamData(let id, let bytes, let fin, let isEarly):
                if isEarly && !core.isClient { serverSawResumption() }  // 0.5-RTT: known before the handshake ends
                sinks.data(id, bytes, fin: fin, isEarly: isEarly)
            case .streamWritable(let id):
                pump.streamWritable(id, self)
            case .streamReset(let id, let code):
                sinks.peerReset(id, code: code)
            case .stopSending(let id, let code):
                sinks.peerStopSending(id, code: code)
            case .streamClosed(let id):
                sinks.streamClosed(id)
            case .streamsAvailable:
                retryPendingOpens()
            case .datagram(let bytes, let isEarly):
                let datagram = Datagram(payload: bytes, isEarly: isEarly)
                if !early.hold(datagram, handshakeCompleted: core.isHandshakeCompleted) { sinks.deliver(datagram) }
            case .pathValidated(let address, let succeeded):
                pump.pathValidated(address, succeeded: succeeded, self)
            case .sessionTicket(let ticket):
                tracker?.ticket = ticket
                refreshResumptionState()
            case .newToken(let token):
                tracker?.token = token
                refreshResumptionState()
            case .earlyDataRejected:
                break
            case .closed(let reason):
                refreshResumptionState()  // keep the last RTT
                pump.connectionWillFinish(reason.error)
                outbound.fail(reason.error)
                reportHandshake(.failure(reason.error))
                sinks.finish(reason)
            }
        }
    }
}
