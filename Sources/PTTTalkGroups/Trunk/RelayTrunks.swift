import PTTTransport
import TransportCore
import TransportIO

/// A relay's trunks to the other relays of its fleet: a listener for the relays whose names sort before this one's
/// (they dial), dials to those whose names sort after it (one trunk per pair), each proven with the fleet secret
/// before it carries anything. Follows the fleet's view: dials the live relays it has no trunk to (again after a
/// trunk broke), closes trunks to relays that left the view.
///
/// The listener and the dialer's connections run on the relay server's first event loop; everything that waits
/// (handshakes, proofs, control messages) runs in tasks, never on the loop.
final class RelayTrunks: Sendable {
    /// What the relay does with what arrives on a trunk.
    struct Handlers: Sendable {
        /// A proven trunk to `peer` came up (tell it what this relay follows).
        var up: @Sendable (TrunkPeer) -> Void
        /// The trunk to `peer` went down.
        var down: @Sendable (TrunkPeer) -> Void
        /// A control message from `peer` (after the proof).
        var message: @Sendable (TrunkPeer, TrunkMessage) -> Void
        /// An audio frame of `group` from `peer`, on the loop: true when it was fanned out.
        var frame: @Sendable (TrunkPeer, String, [UInt8]) -> Bool
        /// A trunk event for `serve --events`: peer, state (up, down, refused, dial-failed), reason.
        var event: @Sendable (String, String, String?) -> Void
    }

    let configuration: TrunkConfiguration
    let me: String
    /// The trunk address this relay publishes.
    let address: ServerAddress
    private let server: TransportServer
    /// Whether `server` is the trunks' own listener (false: the relay's server, trunks beside its phones).
    private let ownsServer: Bool
    private let client: TransportClient
    private let handlers: Handlers
    /// How long a trunk stays although its peer is missing from the view (a view older than its arrival).
    private let grace: UInt64
    private let state = Locked(State())
    let counters = Locked(TrunkStatistics())
    /// The fleet secrets proved and admitted: the current one, then the previous one during a rotation (replaced by
    /// `replaceSecrets`, e.g. on SIGHUP).
    private let secrets: Locked<[[UInt8]]>

    private struct State {
        var peers: [String: TrunkPeer] = [:]
        /// Dials under way, and when each peer was last dialed (a failed dial is retried a second later).
        var dialing: Set<String> = []
        var lastDial: [String: UInt64] = [:]
        var stopped = false
    }

    private init(
        configuration: TrunkConfiguration, me: String, grace: Duration, server: TransportServer, ownsServer: Bool,
        address: ServerAddress, handlers: Handlers
    ) {
        self.configuration = configuration
        self.me = me
        self.server = server
        self.ownsServer = ownsServer
        self.address = address
        self.client = TransportClient(
            configuration: ClientConfiguration(
                serverName: configuration.serverName ?? "", alpn: TrunkConfiguration.alpn, trust: configuration.trust,
                idleTimeout: .seconds(10), handshakeTimeout: .seconds(5), keepAliveInterval: .seconds(1),
                maximumMessageSize: TrunkMessage.maximumSize, datagramReceiveBuffer: 1024,
                datagramSendBuffer: 1024, fallback: .quicOnly),
            loop: server.loop)
        self.handlers = handlers
        self.grace = UInt64(grace.nanoseconds)
        secrets = Locked(configuration.secrets)
    }

    /// Replaces the fleet secrets (`secret`, and `previous` during a rotation): trunks up now carry on, the next
    /// proofs (dialed or accepted) use these.
    ///
    /// - Throws: `invalidConfiguration` for a secret that is not 32 bytes (nothing changes).
    func replaceSecrets(_ secret: [UInt8], previous: [UInt8]?) throws(TransportError) {
        var replaced = configuration
        replaced.secret = secret
        replaced.previousSecret = previous
        try replaced.validate()
        secrets.withLock { $0 = replaced.secrets }
    }

    /// Binds the trunk listener on `loop` (the relay server's first) and starts accepting.
    ///
    /// - Throws: `invalidConfiguration` for a bad secret or listener configuration, `systemCallFailed` (address in
    ///   use).
    static func start(
        configuration: TrunkConfiguration, me: String, grace: Duration, loop: EventLoop, handlers: Handlers
    ) async throws -> RelayTrunks {
        try configuration.validate()
        let listen = ServerConfiguration(
            quic: configuration.listen, certificateChain: configuration.certificateChain,
            privateKey: configuration.privateKey, alpn: TrunkConfiguration.alpn, earlyData: .disabled,
            maxConnections: 1024, maxStreamsPerConnection: 1, idleTimeout: .seconds(10),
            handshakeTimeout: .seconds(5), maximumMessageSize: TrunkMessage.maximumSize,
            datagramReceiveBuffer: 1024, datagramSendBuffer: 1024)
        let server = try await TransportServer.bind(configuration: listen, sharing: loop)
        let trunks = RelayTrunks(
            configuration: configuration, me: me, grace: grace, server: server, ownsServer: true,
            address: server.quicAddress!, handlers: handlers)
        Task { await trunks.acceptAll(server.connections) }
        return trunks
    }

    /// Accepts trunks on the relay's own QUIC listener (`relay` bound with ``TrunkConfiguration/alpn`` among its
    /// `additionalALPNs`): the trunk connections arrive there beside the phones', on the same port.
    ///
    /// - Throws: `invalidConfiguration` for a bad secret, a relay server not accepting the trunks' ALPN, or a
    ///   `listen` address that is not `host:port` with a specific host.
    static func start(
        configuration: TrunkConfiguration, me: String, grace: Duration, on relay: TransportServer, handlers: Handlers
    ) throws(TransportError) -> RelayTrunks {
        try configuration.validate()
        guard relay.additionalALPNs.contains(TrunkConfiguration.alpn), let bound = relay.quicAddress else {
            throw TransportError(
                .invalidConfiguration,
                "trunks on the relay's listener need a QUIC listener accepting ALPN \(TrunkConfiguration.alpn) "
                    + "(TrunkConfiguration.acceptTrunks(on:))")
        }
        let address = try configuration.publishedAddress(bound: bound)
        let trunks = RelayTrunks(
            configuration: configuration, me: me, grace: grace, server: relay, ownsServer: false, address: address,
            handlers: handlers)
        Task { await trunks.acceptAll(relay.additionalConnections) }
        return trunks
    }

    /// Closes every trunk and the listener.
    func stop() async {
        let peers = state.withLock { state in
            state.stopped = true
            return Array(state.peers.values)
        }
        for peer in peers { peer.close(reason: "relay stopping") }
        if ownsServer { await server.shutdown(code: trunkClosedCode) }
    }

    // MARK: - Peers

    /// The peers with a proven trunk now, by name.
    var peers: [String: TrunkPeer] { state.withLock { $0.peers } }

    /// The trunk to `relay`, when it is up.
    func peer(_ relay: String) -> TrunkPeer? { state.withLock { $0.peers[relay] } }

    /// Sends `message` to every peer.
    func broadcast(_ message: TrunkMessage) {
        for peer in peers.values { peer.send(message) }
    }

    /// Any loop thread: one datagram with `frame` of `group` to each peer that follows the group.
    func forward(group: String, frame: [UInt8]) {
        let targets = state.withLock { Array($0.peers.values) }.filter { $0.follows(group) }
        guard !targets.isEmpty else { return }
        let datagram = TrunkDatagram.encode(group: Array(group.utf8), frame: frame)
        var sent: UInt64 = 0
        for peer in targets where (try? peer.connection.sendDatagram(datagram)) != nil { sent += 1 }
        counters.withLock { $0.datagramsSent &+= sent }
    }

    // MARK: - The fleet's view

    /// The live relays and their trunk addresses, as the store answered: dials those after this relay's name that
    /// have no trunk (at most once a second each), closes trunks to relays that left (once they are older than the
    /// grace, so a view from before a peer arrived closes nothing).
    func viewChanged(_ relays: [(name: String, trunk: String)]) {
        let now = MonotonicClock.now()
        let live = Set(relays.map(\.name))
        let (toDial, toClose) = state.withLock { state -> ([(String, String)], [TrunkPeer]) in
            guard !state.stopped else { return ([], []) }
            var dial: [(String, String)] = []
            for relay in relays where relay.name > me && state.peers[relay.name] == nil {
                guard !state.dialing.contains(relay.name),
                    state.lastDial[relay.name].map({ now &- $0 >= 1_000_000_000 }) ?? true
                else { continue }
                state.dialing.insert(relay.name)
                state.lastDial[relay.name] = now
                dial.append((relay.name, relay.trunk))
            }
            let close = state.peers.values.filter { !live.contains($0.name) && now &- $0.upAt > grace }
            for peer in close { state.peers[peer.name] = nil }
            return (dial, close)
        }
        for peer in toClose {
            peer.close(reason: "\(peer.name) left the fleet")
            peerDown(peer, reason: "left the fleet's view")
        }
        for (name, trunk) in toDial { Task { await dial(name, at: trunk) } }
    }

    // MARK: - Dialing

    private func dial(_ name: String, at trunk: String) async {
        defer { _ = state.withLock { $0.dialing.remove(name) } }
        do {
            guard let address = ServerAddress(trunk) else {
                throw TransportError(.invalidConfiguration, "\(name) publishes no usable trunk address (\(trunk))")
            }
            var client = client
            if configuration.serverName == nil {  // verify the name the peer publishes
                var named = client.configuration
                named.serverName = address.host
                client = TransportClient(configuration: named, loop: self.loopOfServer)
            }
            let connection = try await client.connect(to: address)
            do {
                let stream = try await connection.openStream()
                try await stream.send(TrunkMessage.hello(relay: me).encoded())
                guard case .challenge(let relay, let nonce, let revision) = try await Self.next(on: stream) else {
                    throw TrunkMessage.refused("the acceptor did not challenge")
                }
                guard relay == name else {
                    throw TrunkMessage.refused("dialed \(name) at \(trunk), but \(relay) answered")
                }
                guard
                    let mac = TrunkProof.macs(
                        secrets: secrets.withLock { $0 }, nonce: nonce, acceptor: relay, dialer: me)
                else { throw TransportError(.invalidConfiguration, "GnuTLS could not compute the trunk proof") }
                try await stream.send(TrunkMessage.proof(mac: mac).encoded())
                guard case .welcome = try await Self.next(on: stream) else {
                    throw TrunkMessage.refused("\(name) did not welcome the proof")
                }
                await established(
                    TrunkPeer(name: name, connection: connection, stream: stream, dialed: true, revision: revision),
                    stream)
            } catch {
                await connection.close(code: trunkClosedCode, reason: "trunk dial failed")
                throw error
            }
        } catch {
            counters.withLock { $0.dialFailures &+= 1 }
            handlers.event(name, "dial-failed", "\(error)")
        }
    }

    private var loopOfServer: EventLoop { server.loop }

    /// The next control message on `stream`, decoded; a closed stream is refused.
    private static func next(on stream: TransportStream) async throws -> TrunkMessage {
        guard let message = try await stream.nextMessage() else {
            throw TrunkMessage.refused("the trunk's control stream ended")
        }
        return try TrunkMessage(decoding: message.bytes)
    }

    // MARK: - Accepting

    private func acceptAll(_ connections: IncomingConnections) async {
        await withTaskGroup(of: Void.self) { group in
            for await connection in connections {
                group.addTask { [self] in await accept(connection) }
            }
        }
    }

    /// One connection at the listener: nothing is held for it (its datagrams are dropped, no stream but the first
    /// is read) until it proved the fleet secret; no proof within the deadline, a wrong one or garbage closes it.
    private func accept(_ connection: TransportConnection) async {
        let counters = counters
        await connection.setDatagramHandler { _ in counters.withLock { $0.datagramsDropped &+= 1 } }
        // nil: waiting for the proof; true: proven; false: the deadline passed first.
        let proven = Locked<Bool?>(nil)
        let deadline = Task { [configuration] in
            try? await Task.sleep(for: configuration.proofDeadline)
            guard !Task.isCancelled,
                proven.withLock({ outcome in
                    guard outcome == nil else { return false }
                    outcome = false
                    return true
                })
            else { return }
            await connection.close(code: trunkClosedCode, reason: "no trunk proof in time")
        }
        defer { deadline.cancel() }
        let peerName = Locked<String?>(nil)
        do {
            let stream = try await Self.firstStream(of: connection)
            guard case .hello(let dialer, let revision) = try await Self.next(on: stream) else {
                throw TrunkMessage.refused("a trunk starts with hello")
            }
            peerName.withLock { $0 = dialer }
            guard FleetView.isName(dialer), dialer < me else {
                throw TrunkMessage.refused("\(dialer) may not dial \(me) (the relay whose name sorts first dials)")
            }
            let nonce = SecureRandom.bytes(32)
            try await stream.send(TrunkMessage.challenge(relay: me, nonce: nonce).encoded())
            guard case .proof(let mac) = try await Self.next(on: stream) else {
                throw TrunkMessage.refused("a proof of the fleet secret must follow the challenge")
            }
            guard
                TrunkProof.holds(
                    field: mac, secrets: secrets.withLock { $0 }, nonce: nonce, acceptor: me, dialer: dialer)
            else {
                throw TrunkMessage.refused("\(dialer)'s proof of the fleet secret is wrong")
            }
            guard
                proven.withLock({ outcome in
                    guard outcome == nil else { return false }
                    outcome = true
                    return true
                })
            else { throw TrunkMessage.refused("no proof within the deadline") }
            try await stream.send(TrunkMessage.welcome.encoded())
            await established(
                TrunkPeer(name: dialer, connection: connection, stream: stream, dialed: false, revision: revision),
                stream)
        } catch {
            let late = proven.withLock { outcome -> Bool in
                defer { outcome = outcome ?? true }  // the deadline has nothing left to do
                return outcome == false
            }
            let typed =
                late
                ? TrunkMessage.refused("no proof of the fleet secret within \(configuration.proofDeadline)")
                : (error as? TransportError).map { $0.code == .trunkRefused ? $0 : TrunkMessage.refused("\($0)") }
                    ?? TrunkMessage.refused("\(error)")
            counters.withLock { $0.refused &+= 1 }
            handlers.event(peerName.withLock { $0 } ?? connection.remoteAddress, "refused", typed.message)
            await connection.close(code: trunkClosedCode, reason: "trunk refused")
        }
    }

    /// The first stream the dialer opens (later ones are never read).
    private static func firstStream(of connection: TransportConnection) async throws -> TransportStream {
        for await stream in connection.incomingStreams { return stream }
        throw TrunkMessage.refused("the connection closed before its first stream")
    }

    // MARK: - A proven trunk

    /// Registers a proven trunk (replacing an older one to the same relay), installs its datagram handler, reads its
    /// control stream until it ends, then forgets it.
    private func established(_ peer: TrunkPeer, _ stream: TransportStream) async {
        let replaced = state.withLock { state -> (old: TrunkPeer?, stopped: Bool) in
            guard !state.stopped else { return (nil, true) }
            let old = state.peers[peer.name]
            state.peers[peer.name] = peer
            return (old, false)
        }
        if replaced.stopped {
            peer.close(reason: "relay stopping")
            return
        }
        if let old = replaced.old {
            old.close(reason: "replaced by a newer trunk")
            peerDown(old, reason: "replaced by a newer trunk")
        }
        let counters = counters
        let handlers = handlers
        // The channels take trunk frames on the relay server's first loop. A trunk accepted on the relay's own
        // listener may live on another of its loops (the kernel steers it there): its frames hop to the first.
        let first = server.loop
        let onFirst = peer.connection.backend.loop === first
        await peer.connection.setDatagramHandler { [weak peer] datagram in
            guard let peer, let (group, frame) = TrunkDatagram.decode(datagram.payload) else {
                counters.withLock { $0.datagramsDropped &+= 1 }
                return
            }
            let deliver: @Sendable () -> Void = {
                let fannedOut = handlers.frame(peer, group, frame)
                counters.withLock { counters in
                    if fannedOut {
                        counters.datagramsReceived &+= 1
                    } else {
                        counters.datagramsDropped &+= 1
                    }
                }
            }
            if onFirst { deliver() } else { first.execute(deliver) }
        }
        counters.withLock { $0.up &+= 1 }
        handlers.event(peer.name, "up", peer.dialed ? "dialed" : "accepted")
        handlers.up(peer)
        var reason = "the control stream ended"
        do {
            while let message = try await stream.nextMessage() {
                handlers.message(peer, try TrunkMessage(decoding: message.bytes))
            }
        } catch {
            reason = "\(error)"
        }
        let current = state.withLock { state -> Bool in
            guard state.peers[peer.name] === peer else { return false }
            state.peers[peer.name] = nil
            return true
        }
        peer.close(reason: "trunk down")
        if current { peerDown(peer, reason: reason) }
    }

    private func peerDown(_ peer: TrunkPeer, reason: String) {
        counters.withLock { $0.down &+= 1 }
        handlers.event(peer.name, "down", reason)
        handlers.down(peer)
    }
}
