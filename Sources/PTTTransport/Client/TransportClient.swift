import TransportCore
import TransportIO

/// Connects to relays. One client can make many connections; they share one event loop thread per process.
///
/// ```swift
/// let client = TransportClient(configuration: .init(serverName: "relay.example", trust: .caFile("ca.pem")))
/// let connection = try await client.connect(to: ServerAddress("relay.example:4433")!)
/// ```
public final class TransportClient: Sendable {
    /// The configuration every connection of this client uses.
    public let configuration: ClientConfiguration
    /// The event loop and the TLS context confined to it (created by the first connection that needs it). On the
    /// shared loop this is resolved by the first `connect`, so a loop that cannot start is a thrown error there.
    private let binding: RetryingLazy<LoopBound<TLSClientContext?>>

    /// A client whose connections run on the process's shared client event loop, started by the first `connect`.
    public convenience init(configuration: ClientConfiguration) {
        self.init(configuration: configuration) { () throws(TransportError) in
            LoopBound(nil, loop: try SharedLoops.client.get())
        }
    }

    /// A client on a given loop. Sockets are created on the loop's thread, so a loop started inside a network
    /// namespace connects from that namespace (the benchmark's emulated paths use this).
    package convenience init(configuration: ClientConfiguration, loop: EventLoop) {
        self.init(configuration: configuration) { () throws(TransportError) in LoopBound(nil, loop: loop) }
    }

    private init(
        configuration: ClientConfiguration,
        binding: @escaping @Sendable () throws(TransportError) -> LoopBound<TLSClientContext?>
    ) {
        self.configuration = configuration
        self.binding = RetryingLazy(binding)
    }

    /// The loop every connection of this client runs on, and the TLS context (loop thread only).
    ///
    /// - Throws: `systemCallFailed` when the shared loop cannot start (e.g. the process is out of descriptors).
    func loopAndTLS() throws(TransportError) -> (loop: EventLoop, tls: LoopBound<TLSClientContext?>) {
        let bound = try binding.get()
        return (bound.loop, bound)
    }

    /// Connects and returns once the connection is ready (certificate, name and ALPN verified). The transport
    /// follows `configuration.fallback`: QUIC, TCP (QMux over TLS 1.3), or both raced; `connection.path` says
    /// which one won.
    ///
    /// With `resuming`, the saved ticket resumes TLS, the saved token skips address validation and the saved RTT
    /// seeds the first estimate. The replay-safe prefix of `earlyMessages` then travels in 0-RTT on one stream
    /// (`connection.earlyStream`), so the relay can answer in its first flight; the rest follows the handshake.
    /// That holds over TCP too: the prefix goes as TLS 1.3 early data in the first flight (QMux's 0-RTT) when
    /// the saved state holds a TCP ticket and the relay's QMux parameters from an earlier TCP connection, and
    /// `resumption` reads `.resumed(earlyData: .accepted)` when the relay took it; without them, the messages go
    /// as soon as the connection is ready. If the server rejects 0-RTT the transport re-sends the messages in
    /// 1-RTT by itself and reports `.resumed(earlyData: .rejected)`. Unusable state (corrupt, foreign, expired)
    /// is ignored: the connection goes cold and `resumptionDiagnostic` says why.
    ///
    /// `earlyDatagrams` are a woken talker's first audio frames: over QUIC they are queued before the first packet,
    /// so they travel in 0-RTT when the resumed session allows (a relay whose policy delivers early datagrams
    /// forwards them at 0.5-RTT) and right after the handshake otherwise. Like every datagram they are never
    /// retransmitted: frames sent in 0-RTT that the server refuses are lost, and one the server cannot take (too
    /// large, empty) is counted in `datagramsRejected`. Over TCP they are sent once the connection is ready.
    ///
    /// - Throws: `TransportError`: `certificateUntrusted`, `certificateNameMismatch`, `certificateExpired`,
    ///   `alpnMismatch`, `handshakeTimeout`, `unreachable`, `invalidConfiguration`, `cancelled`,
    ///   `systemCallFailed` (e.g. the process is out of file descriptors: the event loop or the socket could not be
    ///   created; a later `connect` tries again), ...
    public func connect(
        to address: ServerAddress, resuming saved: ResumptionState? = nil,
        earlyMessages: [EarlyMessage] = [], earlyDatagrams: [[UInt8]] = []
    ) async throws -> TransportConnection {
        try await connect(
            to: address, resuming: saved, earlyMessages: earlyMessages, earlyDatagrams: earlyDatagrams, avoiding: nil)
    }

    /// `connect`, trying the address `avoiding` (a `remoteAddress`: a draining relay) after every other.
    ///
    /// The wake path, in order (each step one function):
    /// 1. `prepare`: early messages checked, saved state kept only if it belongs to this server (else the
    ///    diagnostic says why), the loop started, the name resolved (`addresses(of:)`): a `ConnectAttempt`.
    /// 2. The policy: `connectQUIC`, `connectTCP`, or `race` (both, TCP after a delay or at once).
    /// 3. `firstAnswering`: the server's addresses in turn, the next one when a first is silent or refuses.
    /// 4. `connectQUIC(_:to:...)`: one address; once more in v1 when a v2 ticket meets Version Negotiation.
    /// 5. `connectQUICOnce` / `connectTCP(_:to:)`: on the loop thread the socket, the core (resumed from the saved
    ///    ticket, token and RTT) and the driver (`startConnection`).
    /// 6. `handshake`: early messages and datagrams queued before the first packet (0-RTT), the handshake awaited,
    ///    the ready driver wrapped in a `TransportConnection`.
    ///
    /// `datagramSink` (a link's): the connection's received datagrams go there from the loop thread, from its first
    /// packet on.
    func connect(
        to address: ServerAddress, resuming saved: ResumptionState?, earlyMessages: [EarlyMessage],
        earlyDatagrams: [[UInt8]], avoiding: String?, datagramSink: LinkDatagramSink? = nil
    ) async throws -> TransportConnection {
        var attempt = try prepare(
            address, resuming: saved, earlyMessages: earlyMessages, earlyDatagrams: earlyDatagrams,
            avoiding: avoiding)
        attempt.datagramSink = datagramSink
        let connection: TransportConnection
        switch configuration.fallback {
        case .quicOnly: connection = try await connectQUIC(attempt, onFirstPacket: {}, onUnreachable: {})
        case .tcpOnly: connection = try await connectTCP(attempt)
        case .race(let delay): connection = try await race(attempt, tcpAfter: delay)
        }
        if connection.path != .quic {
            for datagram in earlyDatagrams { try? connection.sendDatagram(datagram) }
        }
        return connection
    }

    /// Step 1 of the wake path: what one `connect` asks for, checked, with the server's addresses (`avoiding`
    /// last).
    private func prepare(
        _ address: ServerAddress, resuming saved: ResumptionState?, earlyMessages: [EarlyMessage],
        earlyDatagrams: [[UInt8]], avoiding: String?
    ) throws(TransportError) -> ConnectAttempt {
        for message in earlyMessages
        where message.bytes.isEmpty || message.bytes.count > configuration.maximumMessageSize {
            throw TransportError(
                message.bytes.isEmpty ? .messageEmpty : .messageTooLarge,
                "an early message must "
                    + "have 1 to \(configuration.maximumMessageSize) bytes, not \(message.bytes.count)")
        }
        let unusable = saved?.unusableReason(
            for: address, serverName: configuration.serverName, alpn: configuration.alpn)
        _ = try loopAndTLS()  // a loop that cannot start fails here, once, before any attempt or race begins
        let resolved = try addresses(of: address)
        return ConnectAttempt(
            address: address, identity: ServerAddress(host: configuration.serverName, port: address.port),
            remotes: resolved.filter { $0.description != avoiding } + resolved.filter { $0.description == avoiding },
            saved: unusable == nil ? saved : nil,
            diagnostic: unusable.map { "saved resumption state ignored: \($0)" },
            earlyMessages: earlyMessages, earlyDatagrams: earlyDatagrams)
    }

    /// What one `connect` call asked for, shared by the QUIC and TCP attempts.
    struct ConnectAttempt: Sendable {
        let address: ServerAddress
        /// The server's identity, which its resumption state is saved under: its TLS name and the port.
        let identity: ServerAddress
        /// The server's addresses, in the order they are tried.
        let remotes: [SocketAddress]
        /// Saved state that belongs to this server (nil: none, or it was unusable).
        let saved: ResumptionState?
        let diagnostic: String?
        let earlyMessages: [EarlyMessage]
        /// Audio frames to send in 0-RTT over QUIC (over TCP, once the connection is ready).
        var earlyDatagrams: [[UInt8]] = []
        /// Where the connection's datagrams go from the loop thread (a link's; nil: `datagrams`).
        var datagramSink: LinkDatagramSink?
    }

    /// Connects over QUIC to the first of the server's addresses to answer (see `firstAnswering`).
    func connectQUIC(
        _ attempt: ConnectAttempt, onFirstPacket: @escaping @Sendable () -> Void,
        onUnreachable: @escaping @Sendable () -> Void
    ) async throws -> TransportConnection {
        try await firstAnswering(
            attempt.remotes, of: attempt.address, onFirstPacket: onFirstPacket, onUnreachable: onUnreachable
        ) { remote, heard, refused in
            try await self.connectQUIC(attempt, to: remote, onFirstPacket: heard, onUnreachable: refused)
        }
    }

    /// Connects over QUIC once (`connectQUIC` may call it twice).
    func connectQUICOnce(
        _ attempt: ConnectAttempt, to remote: SocketAddress, onFirstPacket: @escaping @Sendable () -> Void,
        onUnreachable: @escaping @Sendable () -> Void
    ) async throws -> TransportConnection {
        let quicResumption = attempt.saved?.quicResumption
        let (loop, tls) = try loopAndTLS()
        let configuration = self.configuration
        return try await handshake(
            attempt, on: loop, path: .quic, remote: remote,
            make: { [self] in
                let socket = try UDPSocket(connectingTo: remote)  // on the loop thread: its namespace
                let driver = try startConnection(
                    loop: loop, tls: tls, socket: socket, remote: remote,
                    configuration: configuration, resumption: quicResumption)
                driver.pump.onFirstPacket = onFirstPacket
                driver.onHandshakeResult = { result in
                    if case .failure(let error) = result, error.code == .unreachable { onUnreachable() }
                }
                return driver
            },
            start: { driver in driver.process() })
    }

    /// Loop side: creates the core connection and starts the handshake.
    private func startConnection(
        loop: EventLoop, tls: LoopBound<TLSClientContext?>, socket: UDPSocket,
        remote: SocketAddress, configuration: ClientConfiguration,
        resumption: ClientResumption?
    ) throws(TransportError) -> QUICConnectionDriver {
        if tls.value == nil {
            tls.value = try configuration.makeTLSContext()
        }
        try QlogSafety.check(directory: configuration.qlogDirectory)
        let core = try QUICConnection(
            clientWith: configuration.quicParameters, tls: tls.value!, serverName: configuration.serverName,
            local: socket.localAddress, remote: remote, now: MonotonicClock.now(), resumption: resumption)
        let sender = try UDPSendBatch(socket: socket, loop: loop)
        let driver = QUICConnectionDriver(
            loop: loop,
            pump: UDPPacketPump(loop: loop, core: core, sender: sender, remote: remote, local: socket.localAddress),
            outbound: core.datagrams, remote: remote, datagramReceiveBuffer: configuration.datagramReceiveBuffer)
        try loop.register(fd: socket.fd, events: EventLoop.readable) { ready in
            if ready & EventLoop.writable != 0 { sender.socketWritable() }
            if ready & ~EventLoop.writable != 0 { driver.socketReadable() }
        }
        return driver
    }
}
