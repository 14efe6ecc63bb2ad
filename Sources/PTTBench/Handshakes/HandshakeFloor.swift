import BenchSupport
import ChildProcesses
import TransportCore

/// The CPU one handshake costs ngtcp2 + GnuTLS alone: client and server `QUICConnection`s exchanging packets in
/// memory (`InMemoryExchange`), each side's work metered with the thread CPU clock. Every connection sends a
/// "join" on a stream and one audio datagram (in 0-RTT when resumed; after the handshake otherwise) and ends when
/// both echoes, the session ticket and the token arrived: the work the socket path's `SetupScenarios.once` does.
///
/// The full and resumed figures come from connections made one after another, each forgotten before the next, so
/// each reuses the memory of the one before. A wake storm instead holds every phone's connection at once; the
/// `live` figures meter resumed handshakes whose connections all stay (both sides): what the storm's memory growth
/// and cache misses add, with no socket.
struct HandshakeFloor: Sendable {
    /// CPU seconds per handshake, per side.
    var fullClient = 0.0
    var fullServer = 0.0
    var resumedClient = 0.0
    var resumedServer = 0.0
    /// CPU seconds per resumed handshake while the `liveCount` connections of the pass all stay open, per side.
    var liveResumedClient = 0.0
    var liveResumedServer = 0.0
    var liveCount = 0
    /// Handshakes that did not finish (should be 0).
    var failures = 0

    static let join = MessageFraming.frame(Array("join channel 7".utf8))
    static let frame = [UInt8](repeating: 0xa5, count: 80)

    /// Runs `count` full then `count` resumed handshakes, then (when `liveCount` > 0) `liveCount` resumed ones that
    /// all stay open, on a thread of its own.
    static func measure(
        certificate: String, privateKey: String, ca: String, count: Int, liveCount: Int = 0
    ) async throws -> HandshakeFloor {
        try await InMemoryPeers.onOwnThread { () throws(TransportError) in
            try run(certificate: certificate, privateKey: privateKey, ca: ca, count: count, liveCount: liveCount)
        }
    }

    private static func run(
        certificate: String, privateKey: String, ca: String, count: Int, liveCount: Int
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
            if let resumption = once(exchange, clientTLS, index: index, resuming: nil).resumption {
                saved = resumption
            } else {
                floor.failures += 1
            }
        }
        floor.fullClient = spent[.client]! / Double(count)
        floor.fullServer = spent[.server]! / Double(count)
        spent = [.client: 0, .server: 0]
        guard var saved else { throw TransportError(.internalError, "no in-memory handshake produced a ticket") }
        // Each resumption uses the ticket the one before brought, as a phone does: a ticket carries 0-RTT once
        // (the relay's anti-replay budget), so reusing one would measure rejected early data and resends.
        for index in 0..<count {
            let outcome = once(exchange, clientTLS, index: count + index, resuming: saved)
            if let next = outcome.resumption { saved = next } else { floor.failures += 1 }
        }
        floor.resumedClient = spent[.client]! / Double(count)
        floor.resumedServer = spent[.server]! / Double(count)
        guard liveCount > 0 else { return floor }
        spent = [.client: 0, .server: 0]
        var held: [QUICConnection] = []  // the clients; the endpoint holds the server's side
        held.reserveCapacity(liveCount)
        for index in 0..<liveCount {
            let outcome = once(exchange, clientTLS, index: 2 * count + index, resuming: saved, staying: true)
            if let next = outcome.resumption { saved = next } else { floor.failures += 1 }
            if let client = outcome.client { held.append(client) }
        }
        floor.liveResumedClient = spent[.client]! / Double(liveCount)
        floor.liveResumedServer = spent[.server]! / Double(liveCount)
        floor.liveCount = liveCount
        return floor
    }

    /// One handshake; returns what the client would save to resume (nil when it did not finish) and the client's
    /// connection. With `staying`, the server's connection stays in its endpoint too.
    private static func once(
        _ exchange: InMemoryExchange, _ tls: TLSClientContext, index: Int, resuming: ClientResumption?,
        staying: Bool = false
    ) -> (resumption: ClientResumption?, client: QUICConnection?) {
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
        guard let client else { return (nil, nil) }
        var completed = false
        var ticket: [UInt8]?
        var token: [UInt8] = []
        var echoedBytes = 0
        var echoedFrame = false
        let done = exchange.run(
            client: client, at: address, keepServerConnection: staying,
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
        guard done, let ticket else { return (nil, client) }
        let resumption = ClientResumption(
            ticket: ticket, transportParameters: client.encodedPeerTransportParameters, token: token,
            smoothedRTT: 0)
        return (resumption, client)
    }
}
