import ChildProcesses
import TransportCore

/// The CPU one handshake costs ngtcp2 + GnuTLS alone: client and server `QUICConnection`s exchanging packets in
/// memory (`InMemoryExchange`), each side's work metered with the thread CPU clock. Every connection sends a
/// "join" on a stream and one audio datagram (in 0-RTT when resumed; after the handshake otherwise) and ends when
/// both echoes, the session ticket and the token arrived: the work the socket path's `SetupScenarios.once` does.
struct HandshakeFloor: Sendable {
    /// CPU seconds per handshake, per side.
    var fullClient = 0.0
    var fullServer = 0.0
    var resumedClient = 0.0
    var resumedServer = 0.0
    /// Handshakes that did not finish (should be 0).
    var failures = 0

    static let join = MessageFraming.frame(Array("join channel 7".utf8))
    static let frame = [UInt8](repeating: 0xa5, count: 80)

    /// Runs `count` full then `count` resumed handshakes on a thread of its own.
    static func measure(certificate: String, privateKey: String, ca: String, count: Int) async throws -> HandshakeFloor
    {
        try await InMemoryPeers.onOwnThread { () throws(TransportError) in
            try run(certificate: certificate, privateKey: privateKey, ca: ca, count: count)
        }
    }

    private static func run(
        certificate: String, privateKey: String, ca: String, count: Int
    ) throws(TransportError) -> HandshakeFloor {
        let peers = try InMemoryPeers(
            certificate: certificate, privateKey: privateKey, ca: ca, earlyDataWindow: 3_600_000)
        let (exchange, clientTLS) = (peers.exchange, peers.clientTLS)
        var spent: [InMemoryExchange.Side: Double] = [.client: 0, .server: 0]
        exchange.meter = { side, work in
            let start = CPUTime.thread()
            work()
            spent[side, default: 0] += CPUTime.thread() - start
        }
        exchange.onServerEvent = { connection, event in connection.echo(event) }  // the echo relay's work
        var floor = HandshakeFloor()
        var saved: ClientResumption?
        for index in 0..<count {
            if let resumption = once(exchange, clientTLS, index: index, resuming: nil) {
                saved = resumption
            } else {
                floor.failures += 1
            }
        }
        floor.fullClient = spent[.client]! / Double(count)
        floor.fullServer = spent[.server]! / Double(count)
        spent = [.client: 0, .server: 0]
        guard let saved else { throw TransportError(.internalError, "no in-memory handshake produced a ticket") }
        for index in 0..<count where once(exchange, clientTLS, index: count + index, resuming: saved) == nil {
            floor.failures += 1
        }
        floor.resumedClient = spent[.client]! / Double(count)
        floor.resumedServer = spent[.server]! / Double(count)
        return floor
    }

    /// One handshake; returns what the client would save to resume, or nil when it did not finish.
    private static func once(
        _ exchange: InMemoryExchange, _ tls: TLSClientContext, index: Int, resuming: ClientResumption?
    ) -> ClientResumption? {
        let address = exchange.clientAddress(index)
        var client: QUICConnection?
        var stream: Int64?
        /// The join and the audio frame: in 0-RTT when resumed, once the handshake completed otherwise.
        func start(_ client: QUICConnection) {
            stream = try? client.openBidirectionalStream()
            if let stream { try? client.write(stream: stream, join, fin: false) }
            try? client.sendDatagram(frame)
        }
        exchange.meter(.client) {
            client = try? QUICConnection(
                clientWith: QUICParameters(), tls: tls, serverName: "localhost", local: address,
                remote: exchange.serverAddress, now: exchange.now, resumption: resuming)
            if let client, client.earlyDataAttempted { start(client) }
        }
        guard let client else { return nil }
        var completed = false
        var ticket: [UInt8]?
        var token: [UInt8] = []
        var echoedBytes = 0
        var echoedFrame = false
        let done = exchange.run(
            client: client, at: address,
            onClientEvent: { event in
                switch event {
                case .handshakeCompleted:
                    completed = true
                    if stream == nil { start(client) }
                case .sessionTicket(let bytes): ticket = bytes
                case .newToken(let bytes): token = bytes
                case .streamData(let id, let bytes, _, _) where id == stream: echoedBytes += bytes.count
                case .datagram: echoedFrame = true
                default: break
                }
            },
            until: {
                completed && ticket != nil && !token.isEmpty && echoedBytes >= join.count && echoedFrame
            })
        guard done, let ticket else { return nil }
        return ClientResumption(
            ticket: ticket, transportParameters: client.encodedPeerTransportParameters, token: token,
            smoothedRTT: 0)
    }
}
