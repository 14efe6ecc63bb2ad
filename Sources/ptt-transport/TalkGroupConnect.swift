import CommandLineSupport
import Foundation
import PTTTalkGroups
import PTTTransport

/// `ptt-transport connect --user U --group G (--talk N | --listen S)`: a talk-group phone (`TalkGroupPhone`) that
/// talks N frames when granted the floor, or listens S seconds, and reports what it heard.
enum TalkGroupConnect {
    static let usage = """
          --user U --group G joins group G as user U on a talk-group relay (serve --talk-groups), with --token T
          as its credential and --push-token T [--push-platform apns|fcm|other] as its wake address. --talk N
          asks for the floor in the join's flight (0-RTT with --session-file: granted at 0.5-RTT) and, once
          granted, sends N audio frames 20 ms apart, then releases it; --listen S
          listens S seconds. --catch-up asks for the group's burst held at the relay in the join's flight (0-RTT
          with --session-file); --ticket T (a wake ticket, base64url) asks for that ticket's burst instead.
          --priority P (0-255) orders the line; --emergency pre-empts a less urgent talker. --receive-only joins as
          a member that only listens (with --talk it still asks, and is denied with cause 5). With --json: one line
          with early_data, floor ([{event, reason, at_ms}]) and bursts ([{burst, talker, frames, missing, first_seq,
          first_audio_ms, last_audio_ms}]), times in ms since the process started.
        """

    static let options: Set<String> = [
        "user", "group", "token", "push-token", "push-platform", "talk", "listen", "ticket", "priority",
    ]
    static let flags: Set<String> = ["catch-up", "emergency", "receive-only"]

    static func run(
        _ args: Arguments, address: ServerAddress, configuration: ClientConfiguration, sessionFile: String?,
        timeout: Double
    ) async throws {
        let talk = try args.value("talk").map { _ in try args.integer("talk", default: 0) }
        let listen = try args.number("listen")
        guard (talk == nil) != (listen == nil) else {
            throw Arguments.Failure(description: "--user needs one of --talk N or --listen SECONDS")
        }
        if let talk, !(1...15_000).contains(talk) {
            throw Arguments.Failure(description: "--talk takes 1 to 15000 frames")
        }
        if let listen, !(listen > 0 && listen <= 3600) {
            throw Arguments.Failure(description: "--listen takes more than 0, at most 3600 seconds")
        }
        let priority = try args.integer("priority", default: 0)
        guard (0...255).contains(priority) else { throw Arguments.Failure(description: "--priority takes 0 to 255") }
        let user: MemberIdentity
        let wakeAddress: WakeAddress?
        let ticket: WakeTicket?
        do {
            user = try MemberIdentity(try args.required("user"))
            wakeAddress = try args.value("push-token").map { token in
                try WakeAddress(platform: try platform(args.value("push-platform")), token: token)
            }
            ticket = try args.value("ticket").map { try WakeTicket(base64URL: $0) }
        } catch let error as TransportError {
            throw Arguments.Failure(description: "\(error)")
        }
        let group = try args.required("group")
        guard !group.isEmpty, group.utf8.count <= TalkGroupMessage.maximumGroupSize else {
            throw Arguments.Failure(description: "--group takes a name of 1 to 64 bytes")
        }
        let store: ResumptionStore =
            sessionFile.map { path in
                .file(path) { error in FileHandle.standardError.write(Data("ptt-transport: \(error)\n".utf8)) }
            } ?? .memoryOnly
        let phone: TalkGroupPhone
        do {
            phone = try TalkGroupPhone(
                client: TransportClient(configuration: configuration), relay: address,
                configuration: .init(
                    user: user, group: group, credential: Array((args.value("token") ?? "").utf8),
                    wakeAddress: wakeAddress, catchUpOnConnect: args.flag("catch-up") && ticket == nil,
                    role: args.flag("receive-only") ? .receiveOnly : .transmitAndReceive),
                resumption: store, wakingWith: ticket,
                // A talker asks for the floor in its first flight, beside the join (0-RTT with a session file).
                requestingFloor: talk.map { _ in
                    TalkGroupPhone.FloorAsk(priority: UInt8(priority), emergency: args.flag("emergency"))
                })
        } catch {
            throw Arguments.Failure(description: "--ticket: \(error)")
        }
        defer { phone.stop() }
        let log = PhoneLog()
        let listener = Task { for await frame in phone.frames { await log.heard(frame) } }
        let follower = Task { for await event in phone.events { await log.event(event) } }

        // The first ready connection (its 0-RTT outcome), within the timeout.
        guard let connection = await firstReady(phone, within: timeout) else {
            if case .stopped(let error?) = phone.link.status { throw error }
            throw Arguments.Failure(description: "could not join \(group) at \(address) within \(timeout) s")
        }
        let earlyData: String
        switch connection.resumption {
        case .none: earlyData = "none"
        case .resumed(let early): earlyData = early == .notAttempted ? "none" : early.rawValue
        }
        var sent = 0
        if let talk {
            sent = try await talkOnce(phone, frames: talk, log: log, timeout: timeout)
        } else if let listen {
            try? await Task.sleep(until: ProcessClock.started.advanced(by: .milliseconds(Int64(listen * 1000))))
        }
        let path = phone.link.connection?.path ?? connection.path
        await phone.suspend()  // saves the newest session (0-RTT next time) and tells the relay it suspends
        listener.cancel()
        follower.cancel()
        let line = await log.line(
            earlyData: earlyData, path: path.rawValue, resumed: connection.resumption != .none, sent: sent)
        if args.flag("json") {
            print(line)
            fflush(nil)
        } else {
            print("joined \(group) as \(user) over \(path.rawValue) (early data \(earlyData)): \(line)")
        }
    }

    private static func platform(_ name: String?) throws -> WakeAddress.Platform {
        switch name ?? "apns" {
        case "apns": return .apns
        case "fcm": return .fcm
        case "other": return .other
        case let other: throw Arguments.Failure(description: "--push-platform \(other): use apns, fcm or other")
        }
    }

    private static func firstReady(_ phone: TalkGroupPhone, within seconds: Double) async -> TransportConnection? {
        await firstResult(within: .milliseconds(Int64(seconds * 1000))) { try? await phone.link.nextReady() }
    }

    /// Waits for the answer to the floor request the phone made in its first flight; once granted (at once, or
    /// from the line) sends `frames` frames 20 ms apart and releases it. Returns the frames sent.
    private static func talkOnce(
        _ phone: TalkGroupPhone, frames: Int, log: PhoneLog, timeout: Double
    ) async throws
        -> Int
    {
        guard await log.waitForGrant(within: .milliseconds(Int64(timeout * 1000))) else { return 0 }
        let clock = ContinuousClock()
        var next = clock.now
        let audio = [UInt8](repeating: 0x55, count: 60)
        var sent = 0
        for index in 0..<frames {
            // Revoked (pre-empted, talk time out): the floor is no longer this phone's, so it stops talking.
            do { try phone.sendAudio(audio, last: index == frames - 1) } catch { break }
            sent += 1
            next = next.advanced(by: .milliseconds(20))
            try? await Task.sleep(until: next)
        }
        try? await phone.releaseFloor()
        _ = await log.waitForRelease(within: .seconds(1))
        // Pre-empted: the relay names who took the floor right after; stay for it, so the JSON says who.
        _ = await log.waitForNextTalkerIfPreempted(within: .seconds(2))
        return sent
    }
}

/// When the process started (touched first thing in main), for the JSON's `at_ms` and `*_audio_ms`.
enum ProcessClock {
    static let started = ContinuousClock.now

    static func milliseconds(_ instant: ContinuousClock.Instant) -> Double {
        rounded(CommandLineSupport.milliseconds(instant - started))
    }
}

/// What a talk-group phone of the command line saw.
actor PhoneLog {
    private var floor: [[String: Any]] = []
    private var talkers: [UInt64: String] = [:]
    private var bursts: [UInt64: (sequences: Set<UInt32>, first: UInt32, firstAt: Double, lastAt: Double, order: Int)] =
        [:]
    private typealias Waiter = (id: Int, condition: Condition, continuation: CheckedContinuation<Void, Never>)
    private var waiters: [Waiter] = []
    private var nextWaiter = 0
    private var granted = false
    private var denied = false
    private var released = false
    /// The floor was pre-empted from this phone, and whether the relay has named the next talker since.
    private var preempted = false
    private var nextTalkerNamed = false

    func event(_ event: TalkGroupPhone.Event) {
        let at = ProcessClock.milliseconds(.now)
        switch event {
        case .joined(let current?): talkers[current.burst] = current.talker.user
        case .granted:
            granted = true
            floor.append(["event": "granted", "reason": NSNull(), "at_ms": at])
        case .queued(let position): floor.append(["event": "queued", "reason": "position \(position)", "at_ms": at])
        case .denied(let holder, let cause):
            denied = true
            // Cause #1 is "someone else talks": say who. The others say why in the library's words.
            var meaning = cause.meaning
            if cause == .anotherMemberHasPermission, let holder { meaning = "\(holder) holds the floor" }
            floor.append([
                "event": "denied", "reason": "cause \(cause.code): \(meaning)",
                "holder": holder?.user ?? NSNull(), "at_ms": at,
            ])
        case .taken(let burst, let talker):
            talkers[burst] = talker.user
            if preempted { nextTalkerNamed = true }
            floor.append(["event": "taken", "reason": talker.user, "at_ms": at])
        case .released(let burst, let talker, let reason):
            talkers[burst] = talkers[burst] ?? talker.user
            released = true
            if reason == .preempted { preempted = true }
            // A floor taken back (pre-empted, talk time out, the relay's revoke) is "revoked"; given up, "released".
            let revoked: Set<FloorReleaseReason> = [.preempted, .talkTimeExceeded, .revoked]
            floor.append(
                ["event": revoked.contains(reason) ? "revoked" : "released", "reason": reason.rawValue, "at_ms": at])
        case .refused(let error): floor.append(["event": "refused", "reason": "\(error)", "at_ms": at])
        case .replaced:
            floor.append(["event": "replaced", "reason": "the user joined on another connection", "at_ms": at])
        case .joined(nil), .catchUpStarted, .left: break
        }
        resume { holds($0.condition) }
    }

    func heard(_ frame: TalkGroupPhone.HeardFrame) {
        let at = ProcessClock.milliseconds(frame.receivedAt)
        let burst = frame.header.burst
        var entry = bursts[burst] ?? ([], frame.header.sequence, at, at, bursts.count)
        entry.sequences.insert(frame.header.sequence)
        entry.first = min(entry.first, frame.header.sequence)
        entry.lastAt = at
        bursts[burst] = entry
    }

    /// Whether the floor was granted within `limit` (false as soon as it is denied).
    func waitForGrant(within limit: Duration) async -> Bool {
        await wait(until: .grantOrDenial, within: limit)
        return granted
    }

    /// Whether the floor was released or taken back within `limit`.
    func waitForRelease(within limit: Duration) async -> Bool {
        await wait(until: .release, within: limit)
        return released
    }

    /// After a pre-emption, waits (at most `limit`) until the relay names the talker who took the floor.
    func waitForNextTalkerIfPreempted(within limit: Duration) async -> Bool {
        await wait(until: .nextTalkerIfPreempted, within: limit)
        return nextTalkerNamed
    }

    /// What a waiter waits for: each is a condition on the log, met by an event.
    private enum Condition {
        case grantOrDenial, release, nextTalkerIfPreempted
    }

    private func holds(_ condition: Condition) -> Bool {
        switch condition {
        case .grantOrDenial: granted || denied
        case .release: released
        case .nextTalkerIfPreempted: !preempted || nextTalkerNamed
        }
    }

    /// Suspends until `condition` holds or `limit` passes, woken by `event(_:)` (no polling).
    private func wait(until condition: Condition, within limit: Duration) async {
        if holds(condition) { return }
        let id = nextWaiter
        nextWaiter += 1
        let timer = Task { [weak self] in
            try? await Task.sleep(for: limit)
            await self?.expire(id)
        }
        await withCheckedContinuation { waiters.append((id, condition, $0)) }
        timer.cancel()
    }

    private func expire(_ id: Int) { resume { $0.id == id } }

    private func resume(where chosen: (Waiter) -> Bool) {
        let woken = waiters.filter(chosen)
        waiters.removeAll(where: chosen)
        for waiter in woken { waiter.continuation.resume() }
    }

    /// The JSON line: `early_data`, `floor` and `bursts` (in the order first heard), and the rest given.
    func line(earlyData: String, path: String, resumed: Bool, sent: Int) -> String {
        let list = bursts.sorted { $0.value.order < $1.value.order }.map { burst, entry -> [String: Any] in
            let highest = entry.sequences.max() ?? 0
            return [
                "burst": BurstID.text(burst), "talker": talkers[burst] ?? NSNull(), "frames": entry.sequences.count,
                "missing": Int(highest) + 1 - entry.sequences.count, "first_seq": Int(entry.first),
                "first_audio_ms": entry.firstAt, "last_audio_ms": entry.lastAt,
            ]
        }
        return JSONOutput.line([
            "early_data": earlyData, "floor": floor, "bursts": list, "path": path, "resumed": resumed,
            "frames_sent": sent,
        ])
    }
}
