import BenchSupport

@testable import TransportCore

/// A client and a server endpoint joined by an in-memory network on a virtual clock: packets take `oneWayDelay`,
/// and `drop` decides (deterministically) which ones are lost. No sockets, no threads, no wall clock. The endpoints'
/// random bytes (connection IDs, ngtcp2's `rand`) come from generators seeded with `seed`, so two runs of a test
/// issue the same connection IDs (TLS' own randomness, and so the packets' ciphertext, still differs).
final class VirtualNetwork {
    struct InFlight {
        var deliverAt: UInt64
        var toServer: Bool
        var bytes: [UInt8]
        /// The address the packet's path names on the client's side (its source, or its destination): a
        /// migrating client sends from, and is answered on, more than one address.
        var clientSide: SocketAddress? = nil
    }

    let clientAddress = SocketAddress(host: "192.0.2.1", port: 50000)!
    let serverAddress = SocketAddress(host: "192.0.2.2", port: 4433)!
    var now: UInt64 = 1_000 * nanosecondsPerSecond
    var oneWayDelay: UInt64
    var inFlight: [InFlight] = []
    var server: QUICServerEndpoint
    var serverConnections: [QUICConnection] = []
    /// First flights the server holds while their ticket's claim is asked, with the client that sent each.
    var heldFlights: [(key: QUICServerEndpoint.HeldFlightKey, claim: ZeroRTTClaim, client: Int)] = []
    var clients: [QUICConnection] = []
    var clientEvents: [[QUICEvent]] = []
    var serverEvents: [ObjectIdentifier: [QUICEvent]] = [:]
    /// Packet counter per direction, for deterministic loss patterns.
    var sentCount = (toServer: 0, toClient: 0)
    /// Packets the server endpoint answered itself, with no connection (Version Negotiation, Retry, stateless
    /// resets, refusals).
    var endpointReplies = 0
    /// Return true to lose the packet (index counts packets in that direction from 0).
    var drop: (_ toServer: Bool, _ index: Int) -> Bool = { _, _ in false }
    /// Client-side addresses that are unreachable: packets from or to them are lost (a path that does not work).
    var unreachable: Set<SocketAddress> = []
    /// Bytes the server sent to, and received from, each client-side address (for anti-amplification checks).
    var serverBytesTo: [SocketAddress: Int] = [:]
    var serverBytesFrom: [SocketAddress: Int] = [:]
    /// The seed of the endpoints' random generators (the server's, then one per client).
    let seed: UInt64
    /// Called for every server-side event; lets a test echo like the relay does.
    var onServerEvent: ((QUICConnection, QUICEvent) -> Void)?

    init(
        parameters: QUICParameters = QUICParameters(), oneWayDelay: UInt64 = 10 * nanosecondsPerMillisecond,
        requireRetry: Bool = false, tls: TLSServerContext? = nil, secrets: ServerSecrets = .random(),
        seed: UInt64 = 1
    ) throws {
        self.oneWayDelay = oneWayDelay
        self.seed = seed
        var parameters = parameters
        parameters.random = SeededRandom(seed: seed)
        let tls =
            try tls
            ?? TLSServerContext(
                certificateChain: TestCertificates.pem(TestCertificates.serverCert),
                privateKey: TestCertificates.pem(TestCertificates.serverKey), ticketKey: nil)
        server = try QUICServerEndpoint(
            parameters: parameters, tls: tls, secrets: secrets,
            requireRetry: requireRetry)
    }

    @discardableResult
    func addClient(
        parameters: QUICParameters = QUICParameters(), serverName: String = "localhost",
        ca: String = TestCertificates.ca, resumption: ClientResumption? = nil, tls: TLSClientContext? = nil
    ) throws -> QUICConnection {
        var parameters = parameters
        parameters.random = SeededRandom(seed: seed &+ UInt64(clients.count + 1))
        let client = try QUICConnection(
            clientWith: parameters, tls: tls ?? TLSClientContext(trust: .certificates(TestCertificates.pem(ca))),
            serverName: serverName,
            local: clientAddress.with(port: 50000 + UInt16(clients.count)), remote: serverAddress, now: now,
            resumption: resumption)
        clients.append(client)
        clientEvents.append([])
        return client
    }

    var client: QUICConnection { clients[0] }

    /// Runs until `condition` holds or `limit` of virtual time passes; returns whether the condition held.
    @discardableResult
    func run(for limit: UInt64 = 5 * nanosecondsPerSecond, until condition: () -> Bool = { false }) -> Bool {
        let end = now + limit
        while true {
            drainEvents()  // first, so what the handlers write rides in this flush
            flushAll()
            drainEvents()
            if condition() { return true }
            let deadlines =
                inFlight.map(\.deliverAt) + clients.compactMap(\.nextTimeout)
                + serverConnections.compactMap(\.nextTimeout)
            guard let next = deadlines.min(), next <= end else {
                now = end
                return condition()
            }
            now = max(now, next)
            deliverDue()
            for connection in clients + serverConnections {
                if let deadline = connection.nextTimeout, deadline <= now { connection.handleTimeout(now: now) }
            }
        }
    }

    private func flushAll() {
        var buffer = [UInt8](repeating: 0, count: 65536)
        for (index, client) in clients.enumerated() {
            buffer.withUnsafeMutableBytes { raw in
                flush(client, into: raw, toServer: true, clientIndex: index)
            }
        }
        for connection in serverConnections {
            buffer.withUnsafeMutableBytes { raw in flush(connection, into: raw, toServer: false, clientIndex: nil) }
        }
    }

    /// Which client a server connection talks to, by its remote port.
    var serverPeerIndex: [ObjectIdentifier: Int] = [:]

    private func flush(
        _ connection: QUICConnection, into raw: UnsafeMutableRawBufferPointer, toServer: Bool,
        clientIndex: Int?
    ) {
        if let close = connection.takeClosePacket() {
            send(
                close.bytes, toServer: toServer, clientIndex: clientIndex, connection: connection,
                to: toServer || close.remote.length == 0 ? nil : close.remote)
        }
        while true {
            let (length, _) = connection.writePacket(into: raw, now: now)
            if length == 0 { break }
            send(Array(raw.prefix(length)), toServer: toServer, clientIndex: clientIndex, connection: connection)
        }
        connection.finishWriteBurst(now: now)
    }

    private var packetClient: [Int] = []  // parallel to inFlight: which client a packet belongs to

    /// Every packet each client sent, with the virtual time it left (for replay tests).
    var sentByClient: [Int: [(time: UInt64, bytes: [UInt8])]] = [:]

    /// The datagrams client `index` sent in its first flight (before anything came back).
    func firstFlight(client index: Int) -> [[UInt8]] {
        guard let packets = sentByClient[index], let first = packets.first else { return [] }
        return packets.filter { $0.time == first.time }.map(\.bytes)
    }

    /// `destination`: a server packet's address when the connection names it apart from its path (a close).
    private func send(
        _ bytes: [UInt8], toServer: Bool, clientIndex: Int?, connection: QUICConnection,
        to destination: SocketAddress? = nil
    ) {
        if toServer, let clientIndex { sentByClient[clientIndex, default: []].append((now, bytes)) }
        let index = toServer ? sentCount.toServer : sentCount.toClient
        if toServer { sentCount.toServer += 1 } else { sentCount.toClient += 1 }
        let side = toServer ? connection.packetLocal : (destination ?? connection.packetRemote)
        let clientSide = side.length > 0 ? side : nil
        if !toServer {
            serverBytesTo[clientSide ?? clientAddress.with(port: 50000 + UInt16(clientIndex ?? 0)), default: 0] +=
                bytes.count
        }
        if drop(toServer, index) { return }
        if let clientSide, unreachable.contains(clientSide) { return }
        inFlight.append(
            InFlight(deliverAt: now + oneWayDelay, toServer: toServer, bytes: bytes, clientSide: clientSide))
        packetClient.append(clientIndex ?? serverPeerIndex[ObjectIdentifier(connection)] ?? 0)
    }

    /// Sends raw bytes to the server as if from client `index` (for garbage tests).
    func inject(_ bytes: [UInt8], fromClient index: Int = 0) {
        inFlight.append(InFlight(deliverAt: now, toServer: true, bytes: bytes))
        packetClient.append(index)
    }

    /// Sends bytes a server connection wrote outside `run` to client `index`, one way delay from now.
    func injectToClient(_ bytes: [UInt8], client index: Int = 0) {
        inFlight.append(InFlight(deliverAt: now + oneWayDelay, toServer: false, bytes: bytes))
        packetClient.append(index)
    }

    /// Sends raw bytes to the server from `address` (a spoofed source), attributed to client `index`.
    func inject(_ bytes: [UInt8], from address: SocketAddress, client index: Int = 0) {
        inFlight.append(InFlight(deliverAt: now, toServer: true, bytes: bytes, clientSide: address))
        packetClient.append(index)
    }

    private func deliverDue() {
        var remaining: [InFlight] = []
        var remainingClients: [Int] = []
        let due = zip(inFlight, packetClient).filter { $0.0.deliverAt <= now }
        for (packet, owner) in zip(inFlight, packetClient) where packet.deliverAt > now {
            remaining.append(packet)
            remainingClients.append(owner)
        }
        inFlight = remaining
        packetClient = remainingClients
        for (packet, owner) in due {
            let clientAddr = packet.clientSide ?? clientAddress.with(port: 50000 + UInt16(owner))
            if packet.toServer {
                deliverToServer(packet.bytes, from: clientAddr, clientIndex: owner)
            } else if owner < clients.count {
                packet.bytes.withUnsafeBytes {
                    clients[owner].receive(packet: $0, from: serverAddress, to: clientAddr, now: now)
                }
            }
        }
    }

    private func deliverToServer(_ bytes: [UInt8], from clientAddr: SocketAddress, clientIndex: Int) {
        serverBytesFrom[clientAddr, default: 0] += bytes.count
        let outcome = bytes.withUnsafeBytes {
            server.receive(packet: $0, from: clientAddr, to: serverAddress, now: now)
        }
        switch outcome {
        case .deliver(let connection):
            bytes.withUnsafeBytes { connection.receive(packet: $0, from: clientAddr, to: serverAddress, now: now) }
        case .accepted(let connection):
            serverConnections.append(connection)
            serverPeerIndex[ObjectIdentifier(connection)] = clientIndex
        case .reply(let reply):
            endpointReplies += 1
            inFlight.append(InFlight(deliverAt: now + oneWayDelay, toServer: false, bytes: reply))
            packetClient.append(clientIndex)
        case .drop:
            break
        case .held(let key, let claim):
            heldFlights.append((key, claim, clientIndex))
            server.tls.zeroRTTAdmission?.claim(claim.ticket) { [weak self] accepted in
                self?.feedAgain(key, claim, accepted: accepted)
            }
        case .overflowed(let key, let claim):
            feedAgain(key, claim, accepted: false)
        }
    }

    /// The store answered a held flight's claim: its packets reach the server again, with the answer.
    func feedAgain(_ key: QUICServerEndpoint.HeldFlightKey, _ claim: ZeroRTTClaim, accepted: Bool) {
        let client = heldFlights.first { $0.claim === claim }?.client ?? 0
        heldFlights.removeAll { $0.claim === claim }
        server.feedAgain(key, claim: claim, accepted: accepted) { packet in
            deliverToServer(packet.bytes, from: packet.remote, clientIndex: client)
        }
    }

    private func drainEvents() {
        for (index, client) in clients.enumerated() {
            while let event = client.nextEvent() { clientEvents[index].append(event) }
        }
        for connection in serverConnections {
            while let event = connection.nextEvent() {
                serverEvents[ObjectIdentifier(connection), default: []].append(event)
                onServerEvent?(connection, event)
            }
        }
    }

    /// Makes every server connection an echo: stream bytes and FIN back on the same stream, datagrams back.
    func installEcho() {
        onServerEvent = { connection, event in connection.echo(event) }
    }

    /// All stream bytes client `index` received on `stream`, and whether FIN arrived.
    func clientStreamData(_ stream: Int64, client index: Int = 0) -> (bytes: [UInt8], fin: Bool) {
        var bytes: [UInt8] = []
        var fin = false
        for case .streamData(let id, let chunk, let chunkFin, _) in clientEvents[index] where id == stream {
            bytes += chunk
            fin = fin || chunkFin
        }
        return (bytes, fin)
    }

    func clientDatagrams(client index: Int = 0) -> [[UInt8]] {
        clientEvents[index].compactMap { if case .datagram(let bytes, _) = $0 { return bytes } else { return nil } }
    }

    /// What client `index` would save to resume: latest ticket, the server's parameters, token and RTT.
    func resumption(client index: Int = 0) -> ClientResumption? {
        var ticket: [UInt8]?
        var token: [UInt8] = []
        for event in clientEvents[index] {
            if case .sessionTicket(let bytes) = event { ticket = bytes }
            if case .newToken(let bytes) = event { token = bytes }
        }
        guard let ticket else { return nil }
        return ClientResumption(
            ticket: ticket, transportParameters: clients[index].encodedPeerTransportParameters,
            token: token, smoothedRTT: clients[index].statistics.smoothedRTT)
    }

    /// Every stream chunk the server received, with its 0-RTT flag.
    func serverStreamChunks() -> [(bytes: [UInt8], isEarly: Bool)] {
        serverEvents.values.flatMap { events in
            events.compactMap { event -> (bytes: [UInt8], isEarly: Bool)? in
                if case .streamData(_, let bytes, _, let isEarly) = event, !bytes.isEmpty { return (bytes, isEarly) }
                return nil
            }
        }
    }

    func clientHandshakeCompleted(client index: Int = 0) -> Bool {
        clientEvents[index].contains { if case .handshakeCompleted = $0 { return true } else { return false } }
    }

    func clientCloseReason(client index: Int = 0) -> CloseReason? {
        for case .closed(let reason) in clientEvents[index] { return reason }
        return nil
    }

    func serverCloseReasons() -> [CloseReason] {
        serverEvents.values.flatMap { events in
            events.compactMap { if case .closed(let reason) = $0 { return reason } else { return nil } }
        }
    }
}
