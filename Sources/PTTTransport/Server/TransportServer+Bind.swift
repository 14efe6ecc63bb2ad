import TransportCore
import TransportIO

/// Binding a server, in named steps: check the configuration, load its secrets, bind the sockets on the first
/// loop, build the server, start one driver per loop (undoing what was started if one fails), then keep the peer
/// snapshot.
extension TransportServer {
    /// Binds the configured sockets, loads the certificate and key, and starts accepting.
    ///
    /// - Throws: `invalidConfiguration` (bad address, unreadable certificate or key, bad ticket key file, a limit
    ///   below 1), `systemCallFailed` (e.g. address in use, or the process is out of file descriptors so the event
    ///   loop or a socket cannot be created).
    public static func bind(configuration: ServerConfiguration) async throws -> TransportServer {
        let loop = try EventLoop(name: "ptt-server")
        do {
            return try await bind(configuration: configuration, loop: loop)
        } catch {
            loop.shutdown()
            throw error
        }
    }

    /// Binds on a given loop; its sockets are created on the loop's thread (and so in its network namespace).
    /// The server owns the loop from here on and stops it in `shutdown()`; it starts `eventLoops` - 1 more.
    package static func bind(configuration: ServerConfiguration, loop: EventLoop) async throws -> TransportServer {
        let count = min(max(configuration.eventLoops, 1), 64)
        var loops = [loop]
        do {
            for index in 1..<count { loops.append(try EventLoop(name: "ptt-server-\(index)")) }
            return try await bind(configuration: configuration, loops: loops)
        } catch {
            for extra in loops.dropFirst() { extra.shutdown() }
            throw error
        }
    }

    /// Binds on `loop`, which another server owns and keeps running: one loop (whatever `eventLoops` says), and
    /// `shutdown` closes this server's sockets and connections but leaves the loop to its owner (a relay's trunk
    /// listener on the relay server's first loop).
    package static func bind(
        configuration: ServerConfiguration, sharing loop: EventLoop
    ) async throws
        -> TransportServer
    {
        try await bind(configuration: configuration, loops: [loop], ownsLoops: false)
    }

    private static func bind(
        configuration asGiven: ServerConfiguration, loops: [EventLoop], ownsLoops: Bool = true
    ) async throws
        -> TransportServer
    {
        let (configuration, zeroRTTRefusal) = try checked(asGiven)
        let (loadedTicketKey, previousTicketKey, fleetSecrets) = try configuration.loadSecrets()
        // One key for every loop's TLS context, random for the process when none is configured (kept by `reload`).
        let ticketKey = loadedTicketKey ?? (0..<64).map { _ in UInt8.random(in: 0...255) }
        let sockets = try await bindSockets(configuration, on: loops[0], count: loops.count)
        // Stateless resets are this relay's own: keyed by its identity, which needs the bound QUIC port.
        let secrets = fleetSecrets.forRelay(
            configuration.resolvedRelayIdentity(quicPort: sockets.value.udp.first?.localAddress.port ?? 0))
        let server = TransportServer(
            loops: loops, steering: sockets.value.steering,
            quicAddress: sockets.value.udp.first.map { ServerAddress(bound: $0.localAddress) },
            tcpAddress: sockets.value.tcp.map { ServerAddress(bound: $0.localAddress) },
            connections: Mailbox<TransportConnection>(), zeroRTTRefusal: zeroRTTRefusal,
            earlyDataEnabled: configuration.earlyData.isEnabled, ownsLoops: ownsLoops,
            additionalALPNs: configuration.additionalALPNs)
        server.processTicketKey.withLock { $0 = ticketKey }
        let keys = TicketKeys(current: ticketKey, previous: previousTicketKey)
        do {
            try await server.startDrivers(configuration, sockets: sockets, secrets: secrets, ticketKeys: keys)
        } catch {
            await server.stopDrivers(closing: sockets)
            throw error
        }
        if let path = configuration.peerSnapshotPath {
            await server.keepPeerSnapshot(
                at: path, secret: secrets.statelessResetSecret, maxConnections: configuration.maxConnections)
        }
        return server
    }

    /// The configuration to run (early data off when the linked GnuTLS cannot serve it safely, with the reason),
    /// after the checks that need no socket or file.
    private static func checked(
        _ asGiven: ServerConfiguration
    ) throws(TransportError) -> (ServerConfiguration, zeroRTTRefusal: String?) {
        let zeroRTTRefusal = asGiven.earlyData.isEnabled ? asGiven.gnutlsSafety.zeroRTTRefusal : nil
        let configuration = zeroRTTRefusal == nil ? asGiven : asGiven.withEarlyData(.disabled)
        guard configuration.quic != nil || configuration.tcp != nil else {
            throw TransportError(.invalidConfiguration, "no listening address configured (neither QUIC nor TCP)")
        }
        guard configuration.maxPendingTCPHandshakes >= 1, configuration.maxPendingTCPHandshakesPerSource >= 1 else {
            throw TransportError(
                .invalidConfiguration,
                "maxPendingTCPHandshakes and maxPendingTCPHandshakesPerSource "
                    + "must be at least 1 (they are \(configuration.maxPendingTCPHandshakes) and "
                    + "\(configuration.maxPendingTCPHandshakesPerSource))")
        }
        _ = try configuration.quic.map(parse)
        _ = try configuration.tcp.map(parse)
        try QlogSafety.check(directory: configuration.qlogDirectory)
        return (configuration, zeroRTTRefusal)
    }

    /// The sockets a server listens on, and how packets reach the loop that owns their connection.
    struct BoundSockets {
        /// One UDP socket per loop (a SO_REUSEPORT group with several loops); empty without QUIC.
        var udp: [UDPSocket]
        /// The TCP listener (QMux), accepted on the first loop; nil without TCP.
        var tcp: TCPListener?
        var steering: ReuseportGroup.Steering
    }

    /// The ticket keys every loop's TLS context gets.
    private struct TicketKeys: Sendable {
        var current: [UInt8]
        var previous: [UInt8]?
    }

    /// Binds (or, in a worker, adopts) the sockets on `loop`'s thread. Port 0 for both QUIC and TCP on one address
    /// gets the same port number for both: the kernel picks it for UDP, another program may hold it on TCP, and then
    /// another port is tried (up to 20 times) rather than failing.
    private static func bindSockets(
        _ configuration: ServerConfiguration, on loop: EventLoop, count loopCount: Int
    ) async throws -> UnsafeTransfer<BoundSockets> {
        let udpAddress = try configuration.quic.map(parse)
        let tcpAddress = try configuration.tcp.map(parse)
        return try await loop.submit {
            if let inherited = configuration.inheritedSockets {  // a worker: the parent bound and steers them
                return UnsafeTransfer(
                    BoundSockets(
                        udp: try inherited.udp.map { fd throws(TransportError) in try UDPSocket(adopting: fd) },
                        tcp: try inherited.tcp.map { fd throws(TransportError) in try TCPListener(adopting: fd) },
                        steering: ReuseportGroup.Steering.kernelProgram))
            }
            let samePort = tcpAddress.map { $0.port == 0 && $0 == udpAddress } ?? false
            var attempt = 0
            while true {
                attempt += 1
                let udps = try udpAddress.map { address throws(TransportError) in
                    loopCount == 1
                        ? [try UDPSocket(bindingTo: address)] : try ReuseportGroup.bind(address, count: loopCount)
                }
                var tcpAddress = tcpAddress
                if samePort, let udp = udps?.first, let requested = tcpAddress {
                    tcpAddress = requested.with(port: udp.localAddress.port)
                }
                do {
                    let tcp = try tcpAddress.map { address throws(TransportError) in
                        try TCPListener(bindingTo: address)
                    }
                    let steering = ReuseportGroup.steer(
                        udps ?? [], useProgram: configuration.steeringProgram, quicLB: configuration.quicLB)
                    return UnsafeTransfer(BoundSockets(udp: udps ?? [], tcp: tcp, steering: steering))
                } catch {
                    for socket in udps ?? [] { socket.close() }
                    if samePort && attempt < 20 { continue }
                    throw error
                }
            }
        }
    }

    /// Starts each loop's TLS context and drivers: a QUIC driver per UDP socket, and a QMux driver per loop when
    /// TCP is configured (the first loop accepts and deals connections to every loop).
    private func startDrivers(
        _ configuration: ServerConfiguration, sockets: UnsafeTransfer<BoundSockets>, secrets: ServerSecrets,
        ticketKeys: TicketKeys
    ) async throws {
        let shared = try SharedServerState(configuration: configuration, loops: loops.count)
        redisAntiReplay.withLock { $0 = shared.redis }
        let tcpAdmission = SharedTCPAdmission(
            configuration: configuration, drivers: tcp, load: shared.load, relayWide: shared.relayWide)
        let accepted = connectionMailbox
        let additional = additionalMailbox
        let earlyStreams = earlyStreams
        for (index, loop) in loops.enumerated() {
            try await loop.submit { [self] in
                let tls = try configuration.makeTLSContext(
                    ticketKey: ticketKeys.current, previousTicketKey: ticketKeys.previous,
                    antiReplayStore: shared.zeroRTTAdmission(loop: loop))
                antiReplayStores[index].value = tls.antiReplayStore
                if index < sockets.value.udp.count {
                    let endpoint = try QUICServerEndpoint(
                        parameters: configuration.quicEndpointParameters, tls: tls, secrets: secrets,
                        requireRetry: configuration.requireRetry, limits: configuration.quicLimits)
                    try shared.share(with: endpoint, loop: index, quicLB: configuration.quicLB)
                    quic[index].value = try QUICServerDriver(
                        loop: loop, socket: sockets.value.udp[index], endpoint: endpoint,
                        configuration: configuration,
                        group: ServerLoopGroup(index: index, drivers: quic, inherited: configuration.inheritedSockets),
                        load: shared.load
                    ) { connection, isAdditional in
                        if isAdditional {
                            additional.send(connection)
                        } else {
                            earlyStreams.install(on: connection)  // before its first flight's streams are read
                            accepted.send(connection)
                        }
                    }
                }
                if sockets.value.tcp != nil {
                    tcp[index].value = try QMuxServerDriver(
                        loop: loop, listener: index == 0 ? sockets.value.tcp : nil, tls: tls,
                        configuration: configuration, index: index, admission: tcpAdmission
                    ) { connection in accepted.send(connection) }
                }
            }
        }
    }

    /// Undoes a start that failed part-way: every driver started so far closes its socket, then the sockets close.
    private func stopDrivers(closing sockets: UnsafeTransfer<BoundSockets>) async {
        for (index, loop) in loops.enumerated() {
            _ = try? await loop.submit { [self] in
                quic[index].value?.closeSocket()
                quic[index].value = nil
                tcp[index].value?.closeListener()
                tcp[index].value = nil
            }
        }
        _ = try? await loop.submit {
            for socket in sockets.value.udp { socket.close() }
            sockets.value.tcp?.close()
        }
    }

    private static func parse(_ text: String) throws(TransportError) -> SocketAddress {
        guard let address = SocketAddress(parsing: text) else {
            throw TransportError(
                .invalidConfiguration,
                "cannot parse the listening address \(text); use HOST:PORT with a numeric host")
        }
        return address
    }
}
