import Foundation
import PTTTalkGroups
import PTTTransport
import Testing
import TransportCore

/// A talk-group relay in this process (QUIC and TCP on one port, 0-RTT answered at 0.5-RTT) and phones on it, with
/// everything they heard recorded, for the talk-group end-to-end tests.
final class TalkGroupBed: Sendable {
    let server: TransportServer
    let relay: TalkGroupRelay
    let address: ServerAddress
    let hook: RecordingWakeSender
    private let running: Task<Void, Never>

    init(
        hook: RecordingWakeSender = RecordingWakeSender(),
        authenticator: @escaping TalkGroupRelay.Authenticator = { _ in true },
        configure: (inout TalkGroupRelay.Configuration) -> Void = { _ in },
        events: (@Sendable (TalkGroupEvent) -> Void)? = nil
    ) async throws {
        var configuration = Fixtures.serverConfiguration()
        configuration.tcp = "127.0.0.1:0"
        configuration.earlyData = .enabled(deliverBeforeHandshake: true)
        let server = try await TransportServer.bind(configuration: configuration)
        self.server = server
        guard let address = server.quicAddress else { throw TransportError(.internalError, "no QUIC address") }
        self.address = address
        var relayConfiguration = TalkGroupRelay.Configuration(
            identity: RelayIdentity(serverName: "localhost", port: address.port))
        relayConfiguration.floor = FloorControl(policy: .queue(limit: 4), idleRelease: .seconds(10))
        relayConfiguration.frameLifetime = .seconds(5)  // a loaded test machine stalls loops longer than 100 ms
        relayConfiguration.liveness = nil  // nor must a stall be taken for a vanished talker
        configure(&relayConfiguration)
        let relay = TalkGroupRelay(
            server: server, configuration: relayConfiguration, authenticator: authenticator, wakeSender: hook,
            events: events)
        self.relay = relay
        self.hook = hook
        running = Task { await relay.run() }
    }

    func shutdown() async {
        running.cancel()
        await server.shutdown()
    }

    /// A phone of `user` in `group`, recorded; `client` shares resumption across phones of one user.
    func phone(
        _ user: String, group: String = "dispatch", path: FallbackPolicy = .quicOnly, token: String? = "tok-\(UUID())",
        credential: String = "", resumption: ResumptionStore = .memoryOnly, ticket: WakeTicket? = nil,
        role: FloorRole = .transmitAndReceive
    ) throws -> RecordedPhone {
        let phone = try TalkGroupPhone(
            client: TCPFallbackTests.client(path), relay: ServerAddress(host: "localhost", port: address.port),
            configuration: .init(
                user: try MemberIdentity(user), group: group, credential: Array(credential.utf8),
                wakeAddress: try token.map { try WakeAddress(platform: .apns, token: $0) }, role: role),
            resumption: resumption, wakingWith: ticket)
        return RecordedPhone(phone)
    }
}

/// A phone with what it heard: events and frames, in order.
final class RecordedPhone: Sendable {
    let phone: TalkGroupPhone
    let events = Locked<[TalkGroupPhone.Event]>([])
    let frames = Locked<[TalkGroupPhone.HeardFrame]>([])
    private let readers: [Task<Void, Never>]

    init(_ phone: TalkGroupPhone) {
        self.phone = phone
        readers = [
            Task { [events] in for await event in phone.events { events.withLock { $0.append(event) } } },
            Task { [frames] in for await frame in phone.frames { frames.withLock { $0.append(frame) } } },
        ]
    }

    deinit {
        phone.stop()
        for reader in readers { reader.cancel() }
    }

    /// Waits (up to `limit`) until `condition` holds for the events so far; returns whether it did.
    @discardableResult
    func waitForEvent(
        within limit: Duration = .seconds(10), _ condition: @escaping @Sendable ([TalkGroupPhone.Event]) -> Bool
    ) async -> Bool {
        await eventually(within: limit) { condition(self.events.withLock { $0 }) }
    }

    /// Waits until the phone joined (on its current connection: `count` joins so far).
    @discardableResult
    func joined(count: Int = 1) async -> Bool {
        await waitForEvent { $0.filter { if case .joined = $0 { true } else { false } }.count >= count }
    }

    /// Talks a frame every 20 ms (a voice call's pace) until the returned task is cancelled; send failures are
    /// ignored, since these talkers outlive the relays the tests kill.
    func talkUntilCancelled() -> Task<Void, Never> {
        Task { [phone] in
            while !Task.isCancelled {
                try? phone.sendAudio([UInt8](repeating: 0x55, count: 60))
                try? await Task.sleep(for: .milliseconds(20))
            }
        }
    }

    /// Asks for the floor and records an issue unless it is granted; returns whether it was.
    @discardableResult
    func requestGrantedFloor() async throws -> Bool {
        guard case .granted = try await phone.requestFloor() else {
            Issue.record("the talker was not granted the floor")
            return false
        }
        return true
    }

    /// The sequences heard of `burst`, in arrival order.
    func sequences(of burst: UInt64) -> [UInt32] {
        frames.withLock { $0.filter { $0.header.burst == burst }.map(\.header.sequence) }
    }
}

/// Polls `condition` every 5 ms until it holds or `limit` passes; returns whether it held.
func eventually(within limit: Duration = .seconds(10), _ condition: @escaping @Sendable () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now.advanced(by: limit)
    while ContinuousClock.now < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return condition()
}

/// A wake hook that records each request; `blocking` makes every call hang until the test releases it.
final class RecordingWakeSender: WakeSender {
    let requests = Locked<[WakeRequest]>([])
    private let hang: Bool
    private let calls = Locked(0)

    init(hang: Bool = false) { self.hang = hang }

    func wake(_ request: WakeRequest) async throws {
        requests.withLock { $0.append(request) }
        calls.withLock { $0 += 1 }
        if hang {
            // A hook that never returns and ignores its cancellation: only the process's end stops it.
            while true { try? await Task.sleep(for: .seconds(3600)) }
        }
    }
}
