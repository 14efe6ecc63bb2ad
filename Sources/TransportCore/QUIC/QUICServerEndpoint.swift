internal import CNgtcp2
internal import CTransportShims
import Glibc

/// The server side of QUIC, sans-IO: routes each UDP payload to its connection by destination connection ID,
/// accepts new connections from valid Initials, and answers what has no connection (Version Negotiation,
/// Retry, stateless reset, CONNECTION_REFUSED). Malformed, truncated or unknown packets are dropped without
/// allocating per-packet state.
///
/// - Important: Not thread-safe; owned by one event loop, like the connections it creates.
package final class QUICServerEndpoint {
    package struct Limits: Sendable {
        /// Connections beyond this are refused with CONNECTION_REFUSED.
        package var maxConnections = 20_000
        /// Stateless resets sent per second at most (each answers a packet for an unknown connection).
        package var statelessResetsPerSecond = 200
        /// Under load, validate addresses with Retry: once this many connections are live, new ones get a Retry
        /// (unless they present a valid token). nil: only when `requireRetry` is set.
        package var retryAboveConnections: Int? = nil
        /// What one source (IPv4 address, IPv6 /64) may hold and open; nil: no per-source limit. Over it, a
        /// client that has not proven its address gets a Retry, one that has is refused with CONNECTION_REFUSED
        /// (see `SourceLedger`).
        package var perSource: SourceLimits? = nil
        package init() {}
    }

    /// What to do with a received packet.
    package enum Outcome {
        /// Feed the packet to this connection (`QUICConnection.receive`).
        case deliver(QUICConnection)
        /// A new connection whose ClientHello was read: the endpoint fed it the packet (and any before it). Adopt
        /// it and let it write.
        case accepted(QUICConnection)
        /// Send these bytes back to the sender; no connection is involved.
        case reply([UInt8])
        /// Nothing to do (garbage, unknown, rate-limited, a 0-RTT packet ahead of its Initial, or a packet the
        /// endpoint fed to a connection still waiting for the rest of its ClientHello, or held).
        case drop
        /// The packet completed a ClientHello whose ticket's claim must be asked of the shared anti-replay store:
        /// the endpoint dropped the new connection silently and holds its first flight under `HeldFlightKey`
        /// (and the packets that follow it). Start the claim (`ZeroRTTAdmission.claim`), and with its answer feed
        /// the flight again (`feedAgain`).
        case held(HeldFlightKey, ZeroRTTClaim)
        /// A held flight grew past `heldFlightBytes`: feed it again now (`feedAgain`) with 0-RTT refused (counted as
        /// `notHeld`).
        case overflowed(HeldFlightKey, ZeroRTTClaim)
    }

    /// Where a held first flight waits: the destination connection ID its client chose.
    package struct HeldFlightKey: Hashable, Sendable {
        let dcid: ConnectionID
    }

    /// A copy of a packet fed to a connection before its ClientHello was read, to feed it again.
    package struct HeldPacket: Sendable {
        package let bytes: [UInt8]
        package let remote: SocketAddress
        package let local: SocketAddress
        package let ecn: UInt32

        package init(bytes: [UInt8], remote: SocketAddress, local: SocketAddress, ecn: UInt32) {
            self.bytes = bytes
            self.remote = remote
            self.local = local
            self.ecn = ecn
        }
    }

    /// The most bytes of first flight held per connection until its ClientHello was read, and per flight while
    /// its claim is asked: a ClientHello (post-quantum key shares make two Initials of it) and a wake's 0-RTT.
    package static let heldFlightBytes = 32 * 1024
    /// The most new connections fed by the endpoint at once while their ClientHello is incomplete (the oldest
    /// is dropped to make room: its client sends its Initial again), and how long one may wait for the rest.
    package static let maxIncompleteClientHellos = 256
    static let incompleteClientHelloLifetime: UInt64 = 10 * nanosecondsPerSecond
    /// How long a held flight waits at most (its claim answers within the store's deadline; this only clears a
    /// flight whose answer never came).
    static let heldFlightLifetime: UInt64 = 10 * nanosecondsPerSecond

    package let parameters: QUICParameters
    /// The TLS context of new connections (`reload` replaces it; each connection keeps the one it started with).
    package private(set) var tls: TLSServerContext
    package var limits: Limits {
        didSet {
            if oldValue.perSource != limits.perSource { ledger = limits.perSource.map(LocalSourceAdmission.init) }
        }
    }
    /// What makes the connection IDs this endpoint's connections issue: the event loop they name when the server
    /// runs several, the QUIC-LB configuration when there is one (by default: 18 random bytes from
    /// `parameters.random`).
    package var connectionIDs: ConnectionIDIssuer
    /// The server's live connections over all its loops, when it runs several: `maxConnections` and
    /// `retryAboveConnections` bound the server, not each loop (nil: this endpoint's own count).
    package var serverConnectionCount: (() -> Int)?
    /// Force address validation with Retry for every new connection (`serve --retry`).
    package var requireRetry: Bool
    /// A draining relay: every new connection is refused (CONNECTION_REFUSED), so its client tries another relay.
    package var refusesNewConnections = false
    /// How long address-validation tokens stay valid.
    package var retryTokenLifetime: UInt64 = 10 * nanosecondsPerSecond
    package var regularTokenLifetime: UInt64 = 7 * 86_400 * nanosecondsPerSecond
    /// The clock tokens are stamped and checked with: wall time, so tokens survive restarts and work on every
    /// relay of a fleet sharing the token secret (injectable for tests).
    package var wallClock: () -> UInt64 = {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return UInt64(ts.tv_sec) * nanosecondsPerSecond + UInt64(ts.tv_nsec)
    }
    package private(set) var secrets: ServerSecrets

    /// A new connection the endpoint feeds itself until its ClientHello was read (so that a flight whose claim
    /// must be asked can be held and fed again, see `Outcome.held`): copies of what it was fed, while within
    /// `heldFlightBytes`.
    private struct IncompleteClientHello {
        let dcid: ConnectionID
        /// The connection (strongly: `routes` holds it too while its ClientHello is incomplete).
        let connection: QUICConnection
        /// Its place in `incompleteOrder` (an `ObjectIdentifier` alone could name a later connection at the same
        /// address).
        let serial: UInt64
        var packets: [HeldPacket] = []
        var bytes = 0
        var holdable = true
    }

    private struct HeldFlight {
        var packets: [HeldPacket]
        var bytes: Int
        let claim: ZeroRTTClaim
        /// The connection's place in its source's budget, kept for the connection the flight makes when fed again
        /// (one connection, not two: a wake storm from one address is charged once per phone).
        let charge: SourceLedger.Charge?
    }

    private var routes: [ConnectionID: QUICConnection] = [:]
    private var incomplete: [ObjectIdentifier: IncompleteClientHello] = [:]
    /// The incomplete ClientHellos in arrival order, for their bounds. A place names its entry in `incomplete` by
    /// key and serial, not by a weak reference: a weak reference gives every connection a side table, and then
    /// every retain of it (several per packet and per forwarded copy) takes the runtime's slow path. A place
    /// whose entry is gone (handed over, held, removed) is stale and leaves when it comes first.
    private var incompleteOrder = FIFOQueue<IncompletePlace>()
    private var nextIncompleteSerial: UInt64 = 0
    private var held: [ConnectionID: HeldFlight] = [:]
    /// The budget charges of flights being fed again, for the connection their first packet makes.
    private var carriedCharges: [ConnectionID: SourceLedger.Charge] = [:]
    private var heldOrder = FIFOQueue<HeldOrderEntry>()

    private struct IncompletePlace {
        let key: ObjectIdentifier
        let serial: UInt64
        let since: UInt64
    }

    private struct HeldOrderEntry {
        let dcid: ConnectionID
        weak var claim: ZeroRTTClaim?
        let since: UInt64
    }
    private var idsByConnection: [ObjectIdentifier: Set<ConnectionID>] = [:]
    private var resetBudget = (second: UInt64(0), used: 0)
    private var ledger: (any SourceAdmission)?
    private var charges: [ObjectIdentifier: SourceLedger.Charge] = [:]
    /// The latest `now` seen, for the per-source accounting of `remove` (which is given no clock).
    private var latestNow: UInt64 = 0
    package private(set) var droppedPackets: UInt64 = 0
    /// Retry packets sent (address validation: `requireRetry`, under load, or a source over its budget).
    package private(set) var retriesSent: UInt64 = 0

    package init(
        parameters: QUICParameters, tls: TLSServerContext, secrets: ServerSecrets,
        requireRetry: Bool = false, limits: Limits = Limits()
    ) throws(TransportError) {
        try parameters.validate()
        if let perSource = limits.perSource, min(perSource.maxLive, perSource.perSecond, perSource.burst) < 1 {
            throw TransportError(
                .invalidConfiguration,
                "per-source limits must allow at least 1 connection, 1 per second and a burst of 1 "
                    + "(got \(perSource.maxLive), \(perSource.perSecond)/s, burst \(perSource.burst)); "
                    + "use nil for no per-source limit")
        }
        self.parameters = parameters
        self.tls = tls
        self.secrets = secrets
        connectionIDs = ConnectionIDIssuer(random: parameters.random)
        try Self.retag(connectionIDs, secrets)
        self.requireRetry = requireRetry
        self.limits = limits
        ledger = limits.perSource.map(LocalSourceAdmission.init)
    }

    /// Issues connection IDs naming `steering`'s loop, following `quicLB` when given, and ending with this relay's
    /// tag otherwise (`ConnectionIDIssuer`).
    ///
    /// - Throws: `tlsFailure` when GnuTLS refuses an AES key.
    package func issueConnectionIDs(
        steering: ConnectionIDSteering?, quicLB: QUICLBConfiguration?
    ) throws(TransportError) {
        connectionIDs = try ConnectionIDIssuer(steering: steering, configuration: quicLB, random: parameters.random)
        try Self.retag(connectionIDs, secrets)
    }

    /// Gives `issuer` the tags of `secrets`: the current one for new IDs, the previous one still recognised.
    private static func retag(_ issuer: ConnectionIDIssuer, _ secrets: ServerSecrets) throws(TransportError) {
        let previous = try secrets.previousConnectionIDTagKey.map { key throws(TransportError) in
            try ConnectionIDTag(key: key)
        }
        issuer.retag(try ConnectionIDTag(key: secrets.connectionIDTagKey), previous: previous)
    }

    /// Uses `ledger` (shared with the server's other loops) for the per-source limits instead of a ledger of
    /// this endpoint's own; nil keeps the own one.
    package func shareSourceLedger(_ ledger: (any SourceAdmission)?) {
        if let ledger { self.ledger = ledger }
    }

    /// The number of live connections.
    package var connectionCount: Int { idsByConnection.count }

    /// Sources the per-source accounting currently remembers (0 without `Limits.perSource`).
    package var trackedSources: Int { ledger?.trackedSources ?? 0 }

    package func receive(
        packet: UnsafeRawBufferPointer, from remote: SocketAddress, to local: SocketAddress, ecn: UInt32 = 0,
        now: UInt64
    ) -> Outcome {
        latestNow = max(latestNow, now)
        guard !packet.isEmpty, let base = packet.baseAddress?.assumingMemoryBound(to: UInt8.self) else {
            return dropped()
        }
        var vc = ngtcp2_version_cid()
        let rv = ngtcp2_pkt_decode_version_cid(&vc, base, packet.count, connectionIDs.length)
        if rv == NGTCP2_ERR_VERSION_NEGOTIATION {
            return versionNegotiation(vc, packetLength: packet.count)
        }
        guard rv == 0 else { return dropped() }
        let dcid = ConnectionID(pointer: vc.dcid, length: vc.dcidlen)
        if let connection = routes[dcid] {
            if incomplete[ObjectIdentifier(connection)] != nil {
                return feed(connection, packet, remote: remote, local: local, ecn: ecn, now: now)
            }
            // RFC 9000 §10.2.1: the closing period answers with the CONNECTION_CLOSE again, within §8's limit
            // toward addresses the peer has not proven (tiny packets carry the connection ID; see ClosingAnswers).
            if connection.isClosed { connection.receivedWhileClosing(from: remote, length: packet.count) }
            return .deliver(connection)
        }
        if held[dcid] != nil { return holdMore(dcid, packet, remote: remote, local: local, ecn: ecn) }
        if vc.version == 0 {  // short header for a connection we do not know: a stateless reset tells the peer
            return statelessReset(dcid: dcid, packetLength: packet.count, now: now)
        }
        return accept(packet: packet, base: base, remote: remote, local: local, ecn: ecn, now: now)
    }

    /// Feeds a new connection whose ClientHello was not read yet, keeping a copy; hands it over once the
    /// ClientHello was read, or holds its flight when the ticket's claim must be asked.
    private func feed(
        _ connection: QUICConnection, _ packet: UnsafeRawBufferPointer, remote: SocketAddress,
        local: SocketAddress, ecn: UInt32, now: UInt64
    ) -> Outcome {
        let key = ObjectIdentifier(connection)
        guard var entry = incomplete.removeValue(forKey: key) else { return .deliver(connection) }
        if entry.holdable && entry.bytes + packet.count <= Self.heldFlightBytes {
            entry.packets.append(HeldPacket(bytes: Array(packet), remote: remote, local: local, ecn: ecn))
            entry.bytes += packet.count
        } else {
            // A refusal of 0-RTT, never a drop.
            entry.packets = []
            entry.bytes = 0
            entry.holdable = false
        }
        let antiReplay = tls.antiReplay
        antiReplay?.beginFeed(holdable: entry.holdable)
        connection.receive(packet: packet, from: remote, to: local, ecn: ecn, now: now)
        if let claim = antiReplay?.endFeed() {
            let charge = charges.removeValue(forKey: key)  // kept with the flight
            remove(connection)  // never adopted: nothing was sent, and the client's packets come here again
            held[entry.dcid] = HeldFlight(packets: entry.packets, bytes: entry.bytes, claim: claim, charge: charge)
            forgetOldHeldFlights(now: now)
            heldOrder.append(HeldOrderEntry(dcid: entry.dcid, claim: claim, since: now))
            return .held(HeldFlightKey(dcid: entry.dcid), claim)
        }
        guard connection.clientHelloRead || connection.isClosed else {
            incomplete[key] = entry
            return .drop
        }
        return .accepted(connection)
    }

    /// A packet for a held flight: kept with it (0-RTT packets, a retransmitted Initial), up to `heldFlightBytes`.
    private func holdMore(
        _ dcid: ConnectionID, _ packet: UnsafeRawBufferPointer, remote: SocketAddress, local: SocketAddress,
        ecn: UInt32
    ) -> Outcome {
        guard var flight = held[dcid] else { return dropped() }
        flight.packets.append(HeldPacket(bytes: Array(packet), remote: remote, local: local, ecn: ecn))
        flight.bytes += packet.count
        held[dcid] = flight
        guard flight.bytes > Self.heldFlightBytes else { return .drop }
        tls.zeroRTTAdmission?.count(.notHeld)
        return .overflowed(HeldFlightKey(dcid: dcid), flight.claim)
    }

    /// Feeds the flight `claim` held under `key` again with the store's answer: `handle` gets its packets in the
    /// order they came, to pass to `receive` as if they had just arrived (nothing when the flight is gone: fed
    /// already, or cleared after `heldFlightLifetime`). The connection they make keeps the flight's place in its
    /// source's budget.
    package func feedAgain(
        _ key: HeldFlightKey, claim: ZeroRTTClaim, accepted: Bool, _ handle: (HeldPacket) -> Void
    ) {
        guard let flight = held[key.dcid], flight.claim === claim else { return }
        held[key.dcid] = nil
        if let charge = flight.charge { carriedCharges[key.dcid] = charge }
        tls.deciding(claim, accepted: accepted) {
            for packet in flight.packets { handle(packet) }
        }
        if let unused = carriedCharges.removeValue(forKey: key.dcid) { ledger?.release(unused, now: latestNow) }
    }

    /// First flights held now.
    package var heldFlightCount: Int { held.count }

    /// Connections waiting for the rest of their ClientHello now.
    package var incompleteClientHelloCount: Int { incomplete.count }

    private func forgetOldHeldFlights(now: UInt64) {
        while let oldest = heldOrder.first {
            if let claim = oldest.claim, let flight = held[oldest.dcid], flight.claim === claim {
                guard now &- oldest.since >= Self.heldFlightLifetime else { return }
                held[oldest.dcid] = nil
                if let charge = flight.charge { ledger?.release(charge, now: now) }
            }
            _ = heldOrder.popFirst()
        }
    }

    /// Makes room for one more incomplete ClientHello: drops those waiting longer than their lifetime, and the
    /// oldest when `maxIncompleteClientHellos` wait.
    private func makeRoomForIncompleteClientHello(now: UInt64) {
        while let oldest = incompleteOrder.first {
            if let entry = incomplete[oldest.key], entry.serial == oldest.serial {
                guard
                    incomplete.count >= Self.maxIncompleteClientHellos
                        || now &- oldest.since >= Self.incompleteClientHelloLifetime
                else { return }
                incomplete[oldest.key] = nil
                remove(entry.connection)
            }
            _ = incompleteOrder.popFirst()
        }
    }

    /// Whether `packet` could start a new connection: a long-header packet whose destination connection ID names
    /// no connection, incomplete ClientHello or held flight here. Such packets cost a handshake's work, so a loop
    /// may take them after the packets of the connections it serves (see `QUICServerDriver`).
    package func mayStartConnection(_ packet: UnsafeRawBufferPointer) -> Bool {
        guard !packet.isEmpty, let base = packet.baseAddress?.assumingMemoryBound(to: UInt8.self),
            base.pointee & 0x80 != 0
        else { return false }
        var vc = ngtcp2_version_cid()
        guard ngtcp2_pkt_decode_version_cid(&vc, base, packet.count, connectionIDs.length) == 0, vc.version != 0
        else { return false }
        let dcid = ConnectionID(pointer: vc.dcid, length: vc.dcidlen)
        return routes[dcid] == nil && held[dcid] == nil
    }

    /// The event loop that owns the connection of `packet` (`ConnectionIDIssuer.owner(of:isOurs:)`), nil when the
    /// packet names none; an ID this endpoint routes is this loop's (held flights included: their packets stay).
    package func owningLoop(of packet: UnsafeRawBufferPointer) -> Int? {
        connectionIDs.owner(of: packet) { routes[$0] != nil || held[$0] != nil }
    }

    /// Forgets a connection that finished its closing period.
    package func remove(_ connection: QUICConnection) {
        let key = ObjectIdentifier(connection)
        incomplete[key] = nil
        for id in idsByConnection.removeValue(forKey: key) ?? [] where routes[id] === connection {
            routes[id] = nil
        }
        connection.onConnectionIDChange = nil
        if let charge = charges.removeValue(forKey: key) { ledger?.release(charge, now: latestNow) }
    }

    private func accept(
        packet: UnsafeRawBufferPointer, base: UnsafePointer<UInt8>, remote: SocketAddress,
        local: SocketAddress, ecn: UInt32, now: UInt64
    ) -> Outcome {
        var header = ngtcp2_pkt_hd()
        // Rejects anything but a well-formed client Initial of at least 1200 bytes; 0-RTT ahead of its Initial
        // comes back as NGTCP2_ERR_RETRY and is dropped, never answered with a Retry.
        guard ngtcp2_accept(&header, base, packet.count) == 0 else { return dropped() }
        if refusesNewConnections { return refuse(header, reason: "relay draining: connect to another relay") }
        let liveConnections = serverConnectionCount?() ?? connectionCount
        if liveConnections >= limits.maxConnections {
            return refuse(header, reason: "server connection limit reached")
        }
        var originalDCID: ConnectionID?
        var retrySCID: ConnectionID?
        var validatedToken: [UInt8]?
        var tokenLength = 0
        var headerCopy = header
        if let tokenBase = ptt_pkt_hd_token(&headerCopy, &tokenLength), tokenLength > 0 {
            let token = UnsafeBufferPointer(start: tokenBase, count: tokenLength)
            switch token.first {
            case UInt8(NGTCP2_CRYPTO_TOKEN_MAGIC_RETRY):
                guard let odcid = verifyRetryToken(token, header: header, remote: remote, now: wallClock()) else {
                    // An invalid Retry token must not be retried again (RFC 9000 §8.1.3): close with INVALID_TOKEN.
                    return refuse(header, code: 0x0b, reason: "invalid or expired retry token")
                }
                originalDCID = odcid
                retrySCID = ConnectionID(header.dcid)
                validatedToken = Array(token)
            case UInt8(NGTCP2_CRYPTO_TOKEN_MAGIC_REGULAR):
                // A valid NEW_TOKEN skips address validation; an invalid or expired one only degrades to it.
                if verifyRegularToken(token, version: header.version, remote: remote, now: wallClock()) {
                    validatedToken = Array(token)
                }
            default:
                break
            }
        }
        let underLoad = limits.retryAboveConnections.map { liveConnections >= $0 } ?? false
        if (requireRetry || underLoad) && validatedToken == nil {
            return retry(header, remote: remote, now: wallClock())
        }
        var charge = carriedCharges.removeValue(forKey: ConnectionID(header.dcid))
        if ledger != nil && charge == nil {
            switch ledger!.admit(remote, validated: validatedToken != nil, now: now) {
            case .admitted(let admitted):
                charge = admitted
            case .refused where validatedToken == nil:
                // Maybe a spoofed address: a Retry costs nothing and the real owner comes back validated.
                return retry(header, remote: remote, now: wallClock())
            case .refused(.tooManyLive):
                return refuse(header, reason: "too many connections from this address")
            case .refused(.tooFast):
                return refuse(header, reason: "too many new connections from this address; retry later")
            }
        }
        let connection: QUICConnection
        do {
            connection = try QUICConnection(
                serverWith: parameters, tls: tls, header: header, originalDCID: originalDCID, retrySCID: retrySCID,
                token: validatedToken, statelessResetSecret: secrets.statelessResetSecret, local: local,
                remote: remote, now: now, connectionIDs: connectionIDs)
        } catch {
            if let charge { ledger?.release(charge, now: now) }
            return dropped()
        }
        let key = ObjectIdentifier(connection)
        idsByConnection[key] = []
        if let charge { charges[key] = charge }
        register(ConnectionID(header.dcid), for: connection)
        for scid in connection.issuedConnectionIDs { register(scid, for: connection) }
        connection.makeNewToken = { [weak self, unowned connection] in
            guard let self else { return nil }
            let version = ngtcp2_conn_get_negotiated_version(connection.conn)
            return self.makeRegularToken(for: remote, version: version, now: self.wallClock())
        }
        connection.onConnectionIDChange = { [weak self, unowned connection] id, added in
            guard let self else { return }
            if added { self.register(id, for: connection) } else { self.unregister(id, for: connection) }
        }
        makeRoomForIncompleteClientHello(now: now)
        nextIncompleteSerial &+= 1
        incomplete[key] = IncompleteClientHello(
            dcid: ConnectionID(header.dcid), connection: connection, serial: nextIncompleteSerial)
        incompleteOrder.append(IncompletePlace(key: key, serial: nextIncompleteSerial, since: now))
        return feed(connection, packet, remote: remote, local: local, ecn: ecn, now: now)
    }

    private func register(_ id: ConnectionID, for connection: QUICConnection) {
        routes[id] = connection
        idsByConnection[ObjectIdentifier(connection)]?.insert(id)
    }

    private func unregister(_ id: ConnectionID, for connection: QUICConnection) {
        if routes[id] === connection { routes[id] = nil }
        idsByConnection[ObjectIdentifier(connection)]?.remove(id)
    }

    // MARK: - Stateless replies

    private func dropped() -> Outcome {
        droppedPackets += 1
        return .drop
    }

    private func versionNegotiation(_ vc: ngtcp2_version_cid, packetLength: Int) -> Outcome {
        guard packetLength >= 1200 else { return dropped() }  // never amplify small packets
        var reply = [UInt8](repeating: 0, count: 256)
        var count = 0
        let versions = ptt_server_versions(&count)
        let n = ngtcp2_pkt_write_version_negotiation(
            &reply, reply.count, parameters.random.byte(), vc.scid, vc.scidlen, vc.dcid, vc.dcidlen, versions, count)
        guard n > 0 else { return dropped() }
        return .reply(Array(reply.prefix(Int(n))))
    }

    private func statelessReset(dcid: ConnectionID, packetLength: Int, now: UInt64) -> Outcome {
        // A reset must be shorter than what triggered it (no loops) and at least 22 bytes (RFC 9000 §10.3).
        guard packetLength > 22 else { return dropped() }
        // Only for IDs this relay issued: another relay sharing the fleet's secret may hold the connection, and a
        // reset from here would end it (RFC 9000 §21.11). One AES block when the ID has the right length.
        guard let secret = resetSecret(for: dcid) else { return dropped() }
        let second = now / nanosecondsPerSecond
        if resetBudget.second != second { resetBudget = (second, 0) }
        guard resetBudget.used < limits.statelessResetsPerSecond else { return dropped() }
        resetBudget.used += 1
        let reset = StatelessReset.packet(
            secret: secret, cid: dcid, length: min(packetLength - 1, 43),
            random: parameters.random)
        return reset.map { .reply($0) } ?? dropped()
    }

    private func refuse(_ header: ngtcp2_pkt_hd, code: UInt64 = 0x02, reason: String) -> Outcome {
        var reply = [UInt8](repeating: 0, count: 1200)
        var dcid = header.scid
        var scid = header.dcid
        let reasonBytes = Array(reason.utf8)
        let n = ngtcp2_crypto_write_connection_close(
            &reply, reply.count, header.version, &dcid, &scid, code, reasonBytes, reasonBytes.count)
        guard n > 0 else { return dropped() }
        return .reply(Array(reply.prefix(Int(n))))
    }

    /// The reset secret of the connection ID `id` this relay issued, under the secret it was issued with (the
    /// previous one during a rotation); nil for an ID it did not issue.
    package func resetSecret(for id: ConnectionID) -> [UInt8]? {
        switch connectionIDs.generation(of: id) {
        case .current: secrets.statelessResetSecret
        case .previous: secrets.previousStatelessResetSecret
        case nil: nil
        }
    }

    /// New connections from now on use `tls` and `secrets` (a SIGHUP's reload): tokens keyed by its token secret,
    /// connection IDs tagged and reset tokens derived with its reset secret — also for the IDs the open connections
    /// issue from now on — while IDs issued under its previous reset secret are still answered with their reset.
    /// Connections already open keep their TLS session.
    ///
    /// - Throws: `tlsFailure` when GnuTLS refuses a tag's AES key; nothing has changed then.
    package func reload(tls: TLSServerContext, secrets: ServerSecrets) throws(TransportError) {
        try Self.retag(connectionIDs, secrets)
        self.tls = tls
        self.secrets = secrets
        var seen = Set<ObjectIdentifier>()
        for connection in routes.values where seen.insert(ObjectIdentifier(connection)).inserted {
            connection.statelessResetSecret = secrets.statelessResetSecret
        }
    }

    private func retry(_ header: ngtcp2_pkt_hd, remote: SocketAddress, now: UInt64) -> Outcome {
        var token = [UInt8](repeating: 0, count: ptt_crypto_max_retry_tokenlen())
        var retrySCID = connectionIDs.makeID().ngtcp2
        var odcid = header.dcid
        let secret = secrets.tokenSecret
        let tokenLength = remote.withSockAddr { addr, length in
            ngtcp2_crypto_generate_retry_token(
                &token, secret, secret.count, header.version, addr, length,
                &retrySCID, &odcid, now)
        }
        guard tokenLength > 0 else { return dropped() }
        var reply = [UInt8](repeating: 0, count: 1200)
        var dcid = header.scid
        let n = ngtcp2_crypto_write_retry(
            &reply, reply.count, header.version, &dcid, &retrySCID, &odcid, token,
            Int(tokenLength))
        guard n > 0 else { return dropped() }
        retriesSent += 1
        return .reply(Array(reply.prefix(Int(n))))
    }

    private func verifyRetryToken(
        _ token: UnsafeBufferPointer<UInt8>, header: ngtcp2_pkt_hd, remote: SocketAddress,
        now: UInt64
    ) -> ConnectionID? {
        var odcid = ngtcp2_cid()
        var dcid = header.dcid
        let secret = secrets.tokenSecret
        let rv = remote.withSockAddr { addr, length in
            ngtcp2_crypto_verify_retry_token(
                &odcid, token.baseAddress, token.count, secret, secret.count,
                header.version, addr, length, &dcid, retryTokenLifetime, now)
        }
        return rv == 0 ? ConnectionID(odcid) : nil
    }

    /// Whether `token` is a NEW_TOKEN this fleet issued to `remote` in a connection of QUIC `version` (a token
    /// belongs to its version, RFC 9369 §5: one from a v2 connection does not validate a v1 Initial).
    package func verifyRegularToken(
        _ token: UnsafeBufferPointer<UInt8>, version: UInt32, remote: SocketAddress, now: UInt64
    ) -> Bool {
        let secret = secrets.tokenSecret(forQUICVersion: version)
        return remote.withSockAddr { addr, length in
            ngtcp2_crypto_verify_regular_token(
                token.baseAddress, token.count, secret, secret.count, addr, length,
                regularTokenLifetime, now)
        } == 0
    }

    /// A NEW_TOKEN for a client at `remote` in a connection of QUIC `version`, bound to both (and valid for
    /// `regularTokenLifetime`).
    package func makeRegularToken(for remote: SocketAddress, version: UInt32, now: UInt64) -> [UInt8]? {
        var token = [UInt8](repeating: 0, count: ptt_crypto_max_regular_tokenlen())
        let secret = secrets.tokenSecret(forQUICVersion: version)
        let n = remote.withSockAddr { addr, length in
            ngtcp2_crypto_generate_regular_token(&token, secret, secret.count, addr, length, now)
        }
        return n > 0 ? Array(token.prefix(Int(n))) : nil
    }
}

/// The server's long-lived secrets. Loaded from files so every relay of a fleet shares them: a client's token then
/// works against any instance and across restarts. Stateless-reset tokens are each relay's own
/// (`forRelay(_:)`): derived from the fleet's secret and the relay's identity, so another relay of the fleet can
/// never produce the reset a client holds for this one's connection (RFC 9000 §21.11), and this relay, restarted with
/// the same identity, still can.
package struct ServerSecrets: Sendable {
    /// Keys address-validation tokens (Retry and NEW_TOKEN).
    package let tokenSecret: [UInt8]
    /// Derives stateless-reset tokens (HMAC over each connection ID, ngtcp2's derivation).
    package let statelessResetSecret: [UInt8]
    /// The key of the `ConnectionIDTag` in the IDs this relay issues, derived from `statelessResetSecret`.
    package let connectionIDTagKey: [UInt8]
    /// The stateless-reset secret being retired, during a rotation: connection IDs issued under it (they carry its
    /// tag) are still answered with the reset their clients hold. New IDs and their tokens use
    /// `statelessResetSecret`.
    package let previousStatelessResetSecret: [UInt8]?
    /// The key of the tag in the IDs issued under `previousStatelessResetSecret`.
    package let previousConnectionIDTagKey: [UInt8]?
    /// `tokenSecret`'s derivation for v2 connections' tokens, made once here rather than for every token.
    private let versionTwoTokenSecret: [UInt8]

    package init(tokenSecret: [UInt8], statelessResetSecret: [UInt8], previousStatelessResetSecret: [UInt8]? = nil) {
        self.tokenSecret = tokenSecret
        self.statelessResetSecret = statelessResetSecret
        connectionIDTagKey = Self.tagKey(statelessResetSecret)
        // The same secret twice is no rotation: one tag to check.
        let previous = previousStatelessResetSecret == statelessResetSecret ? nil : previousStatelessResetSecret
        self.previousStatelessResetSecret = previous
        previousConnectionIDTagKey = previous.map(Self.tagKey)
        versionTwoTokenSecret = Self.derive(tokenSecret, forQUICVersion: LinkedNgtcp2.quicVersion2)
    }

    private static func tagKey(_ resetSecret: [UInt8]) -> [UInt8] {
        Array((hmac(resetSecret, Array("ptt connection ID tag".utf8)) ?? SecureRandom.bytes(32)).prefix(16))
    }

    /// These secrets as the relay called `identity` uses them: the stateless-reset secret (and the previous one,
    /// during a rotation) becomes HMAC-SHA256(fleet reset secret, "ptt stateless reset secret of relay " ‖
    /// identity), and the tag key follows from it. Every relay sharing the fleet's file gets its own, which a
    /// restart with the same identity gets again.
    package func forRelay(_ identity: String) -> ServerSecrets {
        let label = Array("ptt stateless reset secret of relay ".utf8) + Array(identity.utf8)
        // Never the fleet's secret: a failure keeps this process's resets its own (random) instead.
        func derived(_ fleetSecret: [UInt8]) -> [UInt8] { Self.hmac(fleetSecret, label) ?? SecureRandom.bytes(32) }
        return ServerSecrets(
            tokenSecret: tokenSecret, statelessResetSecret: derived(statelessResetSecret),
            previousStatelessResetSecret: previousStatelessResetSecret.map(derived))
    }

    /// These secrets with `tokenSecret` instead (a reload keeps the reset secrets, or takes new ones).
    package func with(tokenSecret: [UInt8]) -> ServerSecrets {
        ServerSecrets(
            tokenSecret: tokenSecret, statelessResetSecret: statelessResetSecret,
            previousStatelessResetSecret: previousStatelessResetSecret)
    }

    /// The secret of NEW_TOKEN tokens issued in QUIC `version`: `tokenSecret` for v1 (tokens from before versions
    /// were told apart stay valid), HMAC-SHA256(tokenSecret, label ‖ version) for any other.
    package func tokenSecret(forQUICVersion version: UInt32) -> [UInt8] {
        switch version {
        case LinkedNgtcp2.quicVersion1: tokenSecret
        case LinkedNgtcp2.quicVersion2: versionTwoTokenSecret
        default: Self.derive(tokenSecret, forQUICVersion: version)
        }
    }

    private static func derive(_ tokenSecret: [UInt8], forQUICVersion version: UInt32) -> [UInt8] {
        // Never the v1 secret: a failure validates nothing.
        hmac(tokenSecret, VersionBinding.message("ptt NEW_TOKEN for QUIC version ", version)) ?? SecureRandom.bytes(32)
    }

    /// HMAC-SHA256(`key`, `message`); nil when GnuTLS fails.
    private static func hmac(_ key: [UInt8], _ message: [UInt8]) -> [UInt8]? {
        HMACSHA256.mac(key: key, message: message)
    }

    /// Fresh random secrets (valid for this process only).
    package static func random() -> ServerSecrets {
        var generator = SystemRandomNumberGenerator()
        func bytes() -> [UInt8] { (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) } }
        return ServerSecrets(tokenSecret: bytes(), statelessResetSecret: bytes())
    }
}
