import PTTTransport
import TransportCore
import TransportIO

/// A phone's side of the talk-group protocol, on a `TransportLink`: it joins its group on every connection (in
/// 0-RTT when it can), follows the floor, hears the group's audio frames, talks when granted, and on a push wakes
/// with the push's `WakeTicket`, asking for the burst it was woken for in the same 0-RTT flight — so the relay
/// answers with the burst's first frames at 0.5-RTT.
///
/// ```swift
/// let phone = TalkGroupPhone(
///     client: TransportClient(configuration: .init(serverName: "relay.example", trust: .caFile("ca.pem"))),
///     relay: ServerAddress(host: "relay.example", port: 4433),
///     configuration: .init(
///         user: try MemberIdentity("unit-7"), group: "dispatch", credential: token,
///         wakeAddress: try WakeAddress(platform: .apns, token: pushToken)),
///     resumption: .file("relay.session"))
/// Task { for await frame in phone.frames { play(frame.audio, burst: frame.header.burst) } }
/// await phone.suspend()                                  // the app goes to sleep
/// try await phone.wake(ticket: WakeTicket(base64URL: payload["ticket"]))  // a push woke it
/// if case .granted = try await phone.requestFloor() {    // talk
///     try phone.sendAudio(opusFrame)                      // every 20 ms
///     try await phone.releaseFloor()
/// }
/// ```
///
/// The link's status (`link.statusUpdates`) maps onto PushToTalk's service status as `TransportLink` documents.
///
/// Mid-burst the phone watches its relay: a frame is due every 20 ms, so after 250 ms of silence without a floor
/// release it sends the relay one probe (a QUIC PING, or QX_PING over TCP), and when nothing at all comes back within
/// 600 ms it closes the connection (`unresponsiveCloseCode`): the link leaves `.ready` and reconnects, its
/// `reconnecting` status saying the relay stopped answering. A dead (killed) or hung (stopped) relay is left about
/// 0.9 s after its last frame, over QUIC and TCP. Between bursts nothing is probed (no battery cost beyond the link's
/// keep-alive); a pause in the talker's speech costs one probe per 250 ms of pause, each answered by the relay's
/// stack.
public final class TalkGroupPhone: Sendable {
    /// Who the phone is and what it joins.
    public struct Configuration: Sendable {
        /// The user.
        public var user: MemberIdentity
        /// The group.
        public var group: String
        /// The credential the relay's authenticator checks.
        public var credential: [UInt8]
        /// Where a push wakes the phone (nil: it is never woken).
        public var wakeAddress: WakeAddress?
        /// Ask for the group's burst held at the relay on every connection (`catchUp` with burst 0 from 0), not only
        /// on a ticket's wake.
        public var catchUpOnConnect: Bool
        /// The member's floor role, sent with every join: ``FloorRole/receiveOnly`` only listens (a floor request is
        /// denied with ``FloorDenyCause/receiveOnly``, and the relay drops its audio).
        public var role: FloorRole

        /// A configuration.
        public init(
            user: MemberIdentity, group: String, credential: [UInt8] = [], wakeAddress: WakeAddress? = nil,
            catchUpOnConnect: Bool = false, role: FloorRole = .transmitAndReceive
        ) {
            self.user = user
            self.group = group
            self.credential = credential
            self.wakeAddress = wakeAddress
            self.catchUpOnConnect = catchUpOnConnect
            self.role = role
        }
    }

    /// What the relay told the phone, in order (`events`).
    public enum Event: Hashable, Sendable {
        /// The phone joined (again, on a new connection); `current` is the burst the relay holds, if any.
        case joined(current: TalkGroupMessage.BurstState?)
        /// The relay replays `burst` from `from`; it had reached `next`.
        case catchUpStarted(burst: UInt64, from: UInt32, next: UInt32)
        /// The floor is this phone's, for `burst`.
        case granted(burst: UInt64)
        /// The phone waits for the floor at `position`.
        case queued(position: UInt64)
        /// The floor request was refused for `cause` (MCPTT's reject cause); `holder` holds the floor (nil: nobody).
        case denied(holder: MemberIdentity?, cause: FloorDenyCause)
        /// `talker` talks in `burst`.
        case taken(burst: UInt64, talker: MemberIdentity)
        /// `talker`'s `burst` ended, for `reason`.
        case released(burst: UInt64, talker: MemberIdentity, reason: FloorReleaseReason)
        /// The phone left its group.
        case left
        /// The relay refused a request.
        case refused(TransportError)
        /// The same user joined on another connection (another device, or a newer process), which replaced this
        /// one: the phone stopped (it does not reconnect, which would replace the other in turn).
        case replaced
    }

    /// The answer to `requestFloor`.
    public enum FloorAnswer: Hashable, Sendable {
        /// Talk: stamp frames with `burst` (`sendAudio` does).
        case granted(burst: UInt64)
        /// Wait at `position`; a `Event.granted` comes when it is the phone's turn.
        case queued(position: UInt64)
        /// Refused for `cause` (MCPTT's reject cause); `holder` holds the floor (nil: nobody).
        case denied(holder: MemberIdentity?, cause: FloorDenyCause)
    }

    /// A floor request a phone makes in its first connection's first flight (`init(...requestingFloor:)`).
    public struct FloorAsk: Hashable, Sendable {
        /// The priority, 0–255 (highest last), as `requestFloor(priority:emergency:)` takes it.
        public var priority: UInt8
        /// An emergency request, as `requestFloor(priority:emergency:)` takes it.
        public var emergency: Bool

        /// A request with `priority` (default 0), an emergency when `emergency`.
        public init(priority: UInt8 = 0, emergency: Bool = false) {
            self.priority = priority
            self.emergency = emergency
        }
    }

    /// An audio frame heard.
    public struct HeardFrame: Hashable, Sendable {
        /// Its header (burst, sequence, capture time).
        public var header: AudioFrameHeader
        /// The codec frame after the header.
        public var audio: [UInt8]
        /// Whether it arrived before the connection's handshake completed (a 0.5-RTT catch-up frame).
        public var isEarly: Bool
        /// When the phone received it.
        public var receivedAt: ContinuousClock.Instant
    }

    /// The link underneath (its status, statistics and connection).
    public let link: TransportLink
    /// Who the phone is and what it joins.
    public let configuration: Configuration
    /// The relay's events, in order. One reader; the newest 1,024 are kept while nobody reads.
    public let events: AsyncStream<Event>
    /// The audio frames heard, in arrival order — except the burst a wake catches up, whose frames come in sequence
    /// order, once each (a live frame that overtook the replay waits up to 300 ms for it). Datagrams that are not
    /// audio frames are dropped. One reader; the newest 4,096 are kept while nobody reads.
    public let frames: AsyncStream<HeardFrame>
    /// The order of the burst a wake catches up (a live frame may overtake the replay): see `CatchUpOrder`.
    private let catchUpOrder = Locked(CatchUpOrder<HeardFrame>())
    private let eventQueue: AsyncStream<Event>.Continuation
    private let frameQueue: AsyncStream<HeardFrame>.Continuation
    private let relay: ServerAddress
    private let serverName: String
    private let state = Locked(PhoneState())
    private let tasks = Locked<[Task<Void, Never>]>([])
    /// Mid-burst, the relay's liveness: silence without a release is probed, and a dead or hung relay left.
    private let relayWatch: RelayWatch

    struct PhoneState {
        /// The burst this phone talks in, its next sequence, and when its first frame was captured.
        var talking: (burst: UInt64, next: UInt32, start: ContinuousClock.Instant?)?
        /// A floor request waiting for its answer, and the connection it went on (nil while it waits for a first
        /// flight): only that connection's end fails it.
        var floorAnswer: (continuation: CheckedContinuation<FloorAnswer, any Error>, on: ObjectIdentifier?)?
        /// A ticket's catch-up, sent after the join on every attempt until a connection is ready.
        var pendingCatchUp: TalkGroupMessage?
        /// A suspended talker's floor request, sent after the join (and catch-up) in every attempt's first flight
        /// until a connection is ready.
        var pendingFloorRequest: TalkGroupMessage?
        /// Whether the latest attempt's first flight carried `pendingFloorRequest`.
        var floorRequestCarried = false

        /// The first flight of the next attempt: `rejoin`, then the pending catch-up and floor request.
        mutating func firstFlight(_ rejoin: [EarlyMessage]) -> [EarlyMessage] {
            floorRequestCarried = pendingFloorRequest != nil
            return rejoin
                + [pendingCatchUp, pendingFloorRequest].compactMap { $0 }.map {
                    EarlyMessage($0.encoded(), replaySafe: true)
                }
        }

        /// `connection` is ready: what its first flight carried is no longer pending. Returns a floor request that
        /// the first flight did not carry (it came while that attempt was under way), to send on it now.
        mutating func connected(_ connection: ObjectIdentifier) -> TalkGroupMessage? {
            pendingCatchUp = nil
            defer {
                pendingFloorRequest = nil
                floorRequestCarried = false
            }
            guard pendingFloorRequest != nil else { return nil }
            if floorAnswer != nil && floorAnswer?.on == nil { floorAnswer?.on = connection }
            return floorRequestCarried ? nil : pendingFloorRequest
        }

        /// `connection`'s control stream ended: the floor request that went on it, if any, will not be answered.
        mutating func ended(_ connection: ObjectIdentifier) -> CheckedContinuation<FloorAnswer, any Error>? {
            guard let waiting = floorAnswer, waiting.on == connection else { return nil }
            floorAnswer = nil
            return waiting.continuation
        }
    }

    /// A phone joining `configuration.group` on the relay at `relay` through `client`; it starts connecting at once.
    ///
    /// - Parameters:
    ///   - client: the client (trust, ALPN, fallback) every connection uses.
    ///   - relay: the relay's address (its name is the one wake tickets must carry).
    ///   - configuration: the user, group, credential and wake address.
    ///   - resumption: where to keep the resumption state (a file survives the app's process: wakes go 0-RTT).
    ///   - backoff: how quickly to try again after a failure.
    ///   - ticket: the push that started the app (a process started by the push): the first connection asks for
    ///     its burst in the same flight as the join.
    ///   - floorAsk: the app was started by a key press (a process started to talk): the first connection asks for
    ///     the floor in the same flight as the join, in 0-RTT when resumed (granted at 0.5-RTT when the relay
    ///     accepts it); the answer comes on `events` (`granted`, `queued` or `denied`).
    ///
    /// - Throws: `ticketForeignRelay` or `talkGroupMalformed` for a ticket of another relay or group.
    public init(
        client: TransportClient, relay: ServerAddress, configuration: Configuration,
        resumption: ResumptionStore = .memoryOnly, backoff: ReconnectBackoff = ReconnectBackoff(),
        wakingWith ticket: WakeTicket? = nil, requestingFloor floorAsk: FloorAsk? = nil
    ) throws(TransportError) {
        self.configuration = configuration
        self.relay = relay
        serverName = client.configuration.serverName
        (events, eventQueue) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .bufferingNewest(1024))
        (frames, frameQueue) = AsyncStream.makeStream(of: HeardFrame.self, bufferingPolicy: .bufferingNewest(4096))
        let join = TalkGroupMessage.join(
            .init(
                group: configuration.group, user: configuration.user, credential: configuration.credential,
                wakeAddress: configuration.wakeAddress, role: configuration.role))
        var rejoin = [EarlyMessage(join.encoded(), replaySafe: true)]
        if configuration.catchUpOnConnect {
            rejoin.append(
                EarlyMessage(
                    TalkGroupMessage.catchUp(group: configuration.group, burst: 0, from: 0).encoded(), replaySafe: true)
            )
        }
        if let ticket {
            try Self.check(ticket, serverName: serverName, relay: relay, group: configuration.group)
            state.withLock { $0.pendingCatchUp = .catchUp(group: configuration.group, burst: ticket.burst, from: 0) }
        }
        if let floorAsk {
            state.withLock {
                $0.pendingFloorRequest = .requestFloor(
                    group: configuration.group, priority: floorAsk.priority, emergency: floorAsk.emergency)
            }
        }
        link = TransportLink(
            client: client, to: relay,
            rejoinEach: { [state, rejoin] in state.withLock { $0.firstFlight(rejoin) } },
            resumption: resumption, backoff: backoff)
        let relayWatch = RelayWatch(link: link, check: LivenessCheck())
        self.relayWatch = relayWatch
        let control = Task { [weak self, link] in
            await link.forEachConnection { connection in await self?.read(connection) }
        }
        let audio = Task { [link, frameQueue, relayWatch, catchUpOrder] in
            for await datagram in link.datagrams {
                guard let header = AudioFrameHeader.peek(datagram.payload) else { continue }
                relayWatch.frameHeard()
                let frame = HeardFrame(
                    header: header, audio: Array(datagram.payload[AudioFrameHeader.size...]),
                    isEarly: datagram.isEarly, receivedAt: .now)
                let ready = catchUpOrder.withLock { order in
                    var ready = order.accept(
                        frame, burst: header.burst, sequence: header.sequence, now: MonotonicClock.now())
                    if header.flags & AudioFrameHeader.lastFrameFlag != 0 { ready += order.end() }
                    return ready
                }
                for frame in ready { frameQueue.yield(frame) }
            }
            frameQueue.finish()
        }
        tasks.withLock { $0 = [control, audio] }
    }

    deinit { stop() }

    // MARK: - Commands

    /// A push woke the phone with `ticket`: connects now (from suspension, or at once if it was waiting to retry),
    /// with the join and a catch-up of the ticket's burst from its start in the same 0-RTT flight. Returns once they
    /// are sent; the burst's frames arrive on `frames`, the answers on `events`.
    ///
    /// - Throws: `ticketForeignRelay` for a ticket naming another relay name or port, `talkGroupMalformed` for one
    ///   of another group; the link's errors (`TransportLink.wake(pending:)`).
    public func wake(ticket: WakeTicket) async throws {
        try Self.check(ticket, serverName: serverName, relay: relay, group: configuration.group)
        let catchUp = TalkGroupMessage.catchUp(group: configuration.group, burst: ticket.burst, from: 0)
        catchUpOrder.withLock { $0.begin(burst: ticket.burst, from: 0) }  // live frames may overtake the replay
        if let connection = link.connection, connection.status == .ready, let stream = connection.earlyStream {
            try await stream.send(catchUp.encoded())  // awake already: ask on the connection it has
            return
        }
        // The next connection's first flight carries it after the join (and every retry's, until one is ready).
        state.withLock { $0.pendingCatchUp = catchUp }
        _ = try await link.wake()
    }

    private static func check(
        _ ticket: WakeTicket, serverName: String, relay: ServerAddress, group: String
    ) throws(TransportError) {
        guard ticket.relay.serverName == serverName, ticket.relay.port == relay.port else {
            throw TransportError(
                .ticketForeignRelay,
                "the ticket names relay \(ticket.relay), but this phone uses \(serverName):\(relay.port)")
        }
        guard ticket.group == group else {
            throw WireFields.malformed("the ticket is for group \(ticket.group), not \(group)")
        }
    }

    /// Connects now if suspended, without a ticket (the join's answer says whether a burst is held).
    public func wake() async throws { _ = try await link.wake() }

    /// The app goes to sleep: the connection closes cleanly (the relay marks the member suspended) and the session
    /// is kept for a 0-RTT wake.
    public func suspend() async { await link.suspend() }

    /// Asks for the floor and returns the relay's answer. `priority` (0–255, highest last) orders the line and, by
    /// the group's policy, pre-empts a lower-priority talker; `emergency` pre-empts a less urgent talker (MCPTT's
    /// Floor Request; the talker hears `released` with reason `.preempted`).
    ///
    /// On a suspended phone (the talker pressed the key while the app slept) it wakes the link and the request
    /// rides in the wake's 0-RTT first flight, after the join: the relay acts on it at once when it accepted the
    /// 0-RTT (its anti-replay store claimed the ticket), so the grant comes back at 0.5-RTT, one round trip after
    /// the key press; when the relay refuses the 0-RTT, the transport sends it again after the handshake.
    ///
    /// - Throws: the relay's refusal (`notAMember` before the join was answered), or the connection's error.
    public func requestFloor(priority: UInt8 = 0, emergency: Bool = false) async throws -> FloorAnswer {
        let request = TalkGroupMessage.requestFloor(
            group: configuration.group, priority: priority, emergency: emergency)
        if link.status == .suspended { return try await wakeRequesting(request) }
        let (connection, stream) = try await controlStream()
        return try await withCheckedThrowingContinuation { continuation in
            let previous = state.withLock { state in
                defer { state.floorAnswer = (continuation, ObjectIdentifier(connection)) }
                return state.floorAnswer
            }
            previous?.continuation.resume(throwing: CancellationError())
            Task {
                do {
                    try await stream.send(request.encoded())
                } catch {
                    state.withLock { $0.floorAnswer.take() }?.continuation.resume(throwing: error)
                }
            }
        }
    }

    /// A suspended talker pressed the key: the link wakes with `request` after the join in its first flight, so
    /// the relay grants at 0.5-RTT when it accepts the 0-RTT (and after the handshake otherwise).
    private func wakeRequesting(_ request: TalkGroupMessage) async throws -> FloorAnswer {
        try await withCheckedThrowingContinuation { continuation in
            let previous = state.withLock { state in
                defer {
                    state.floorAnswer = (continuation, nil)
                    state.pendingFloorRequest = request
                }
                return state.floorAnswer
            }
            previous?.continuation.resume(throwing: CancellationError())
            Task { [link, state] in
                do {
                    _ = try await link.wake()
                } catch {
                    state.withLock { state in
                        state.pendingFloorRequest = nil
                        return state.floorAnswer.take()
                    }?.continuation.resume(throwing: error)
                }
            }
        }
    }

    /// Gives the floor up (the burst ends for everyone); frames sent after it are refused by the relay.
    public func releaseFloor() async throws {
        state.withLock { $0.talking = nil }
        try await controlStream().stream.send(TalkGroupMessage.releaseFloor(group: configuration.group).encoded())
    }

    /// Sends one codec frame in the burst the phone was granted, with its header (the next sequence, and the capture
    /// time from the burst's first frame). Dropped and counted while the link reconnects, like
    /// `TransportLink.sendDatagram`.
    ///
    /// - Parameters:
    ///   - audio: the codec frame (at least one byte).
    ///   - last: the talker's last frame of the burst.
    ///   - expiresAfter: how long the frame may wait to be sent before it is dropped as stale (default 100 ms).
    /// - Throws: `notAMember` when the phone holds no floor; the link's datagram errors.
    public func sendAudio(_ audio: [UInt8], last: Bool = false, expiresAfter: Duration = .milliseconds(100)) throws {
        let now = ContinuousClock.now
        let header = try state.withLock { state throws(TransportError) -> AudioFrameHeader in
            guard var talking = state.talking else {
                throw TransportError(.notAMember, "this phone holds no floor: requestFloor() first")
            }
            let start = talking.start ?? now
            let elapsed = now - start
            let milliseconds =
                elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000
            let header = AudioFrameHeader(
                burst: talking.burst, sequence: talking.next, captureMilliseconds: UInt32(clamping: milliseconds),
                flags: last ? AudioFrameHeader.lastFrameFlag : 0)
            talking.next &+= 1
            talking.start = start
            state.talking = talking
            return header
        }
        try link.sendDatagram(header.frame(audio), expiresAfter: expiresAfter)
    }

    /// Stops the phone for good: the link closes, `events` and `frames` end.
    public func stop() {
        link.stop()
        eventQueue.finish()
        for task in tasks.withLock({ $0 }) { task.cancel() }
        state.withLock { $0.floorAnswer.take() }?.continuation.resume(throwing: CancellationError())
    }

    // MARK: - Reading the relay

    /// The ready connection's control stream (its early stream: the join went there).
    private func controlStream() async throws -> (connection: TransportConnection, stream: TransportStream) {
        let connection = try await link.nextReady()
        guard let stream = connection.earlyStream else {
            throw TransportError(.connectionClosed, "the connection has no control stream")
        }
        return (connection, stream)
    }

    /// Reads `connection`'s control stream until it ends.
    private func read(_ connection: TransportConnection) async {
        // What went in this connection's first flight is no longer pending; a floor request that came too late for
        // it goes now.
        let late = state.withLock { $0.connected(ObjectIdentifier(connection)) }
        guard let stream = connection.earlyStream else { return }
        if let late { try? await stream.send(late.encoded()) }
        while let message = try? await stream.nextMessage() {
            guard let decoded = try? TalkGroupMessage(decoding: message.bytes) else { continue }
            received(decoded)
        }
        state.withLock { $0.ended(ObjectIdentifier(connection)) }?.resume(
            throwing: TransportError(.connectionClosed, "the connection closed before the floor was answered"))
        if case .peer(replacedCloseCode, _)? = try? await connection.closed() {
            eventQueue.yield(.replaced)
            stop()
        }
    }

    private func received(_ message: TalkGroupMessage) {
        let event: Event
        var answer: FloorAnswer?
        var failure: TransportError?
        switch message {
        case .joined(_, _, let current): event = .joined(current: current)
        case .catchUpStarted(_, let burst, let from, let next):
            event = .catchUpStarted(burst: burst, from: from, next: next)
        case .floorGranted(_, let burst):
            state.withLock { state in
                if state.talking?.burst != burst { state.talking = (burst, 0, nil) }
            }
            event = .granted(burst: burst)
            answer = .granted(burst: burst)
        case .floorQueued(_, let position):
            event = .queued(position: position)
            answer = .queued(position: position)
        case .floorDenied(_, let named, let cause):
            // A relay of the first revision names the requester when nobody holds the floor.
            let holder = named == configuration.user ? nil : named
            event = .denied(holder: holder, cause: cause)
            answer = .denied(holder: holder, cause: cause)
        case .floorTaken(_, let burst, let talker):
            relayWatch.burstStarted()  // frames are due every 20 ms from now on
            event = .taken(burst: burst, talker: talker)
        case .floorReleased(_, let burst, let talker, let reason):
            relayWatch.burstEnded()
            if talker == configuration.user { state.withLock { if $0.talking?.burst == burst { $0.talking = nil } } }
            event = .released(burst: burst, talker: talker, reason: reason)
        case .left: event = .left
        case .error(let request, _, _, _):
            let error = message.transportError!
            event = .refused(error)
            if request == TalkGroupMessage.Kind.requestFloor.rawValue { failure = error }
        case .join, .catchUp, .requestFloor, .releaseFloor, .leave: return  // not the relay's to send
        }
        eventQueue.yield(event)
        if let answer { state.withLock { $0.floorAnswer.take() }?.continuation.resume(returning: answer) }
        if let failure { state.withLock { $0.floorAnswer.take() }?.continuation.resume(throwing: failure) }
    }
}
