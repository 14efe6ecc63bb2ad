import Glibc
import TransportCore

/// One event loop's client of the fleet's anti-replay store on Redis: a ticket offered with early data is claimed
/// with one atomic script (`RedisClaimScript`) that also proves the store still holds its memory, over this loop's
/// persistent, pipelined connection (`RedisPipeline`). The loop never waits: `admit` answers `ask`, the handshake's
/// first flight is held while the claim is in flight (see `GnuTLSAntiReplay`), and `claim`'s answer feeds it again.
///
/// Decided at once, without a round trip (`admit`):
/// - a ticket this relay claimed lately, or has a claim in flight for (`RecentTickets`): a replay, refused;
/// - no memory marker known yet, or a ticket created before it: refused (`unknown`);
/// - no connection ready (connecting, or waiting to reconnect): refused (`unavailable`) — the deadline counts a
///   claim's own round trip, never a reconnect.
///
/// A claim (`claim`) takes a grant of the relay's budget (`ZeroRTTBudget`; none left: refused, `overBudget`), then:
/// claimed → accepted (counted once GnuTLS takes the answer); claimed before → a replay, the grant given back; the store's memory changed → refused
/// (`memoryLost`), the grant given back, the new marker learnt (tickets issued before it are refused from then
/// on); no reply within the deadline, an error reply (`OOM`, `READONLY`, `LOADING`, `MASTERDOWN`, any other — the
/// connection is then replaced), or a reply that is not the script's → refused (`unavailable`). `NOSCRIPT` sends
/// the script itself (`EVAL`) within the same deadline.
///
/// Why no replay gets through: see `RedisClaimScript` (no key loss goes unnoticed) and `GnuTLSAntiReplay`
/// (GnuTLS accepts early data only for tickets younger than the window and the store's memory; a claim lives one
/// window plus the clock-skew allowance, so it outlives the ticket's 0-RTT wherever it is presented).
///
/// Bound: a relay makes at most `capacity` claims per window that could create an entry, so a fleet of N relays
/// holds at most about N × capacity entries, about 100 bytes each in Redis, whatever strangers do.
///
/// - Important: Made and used on its event loop's thread.
package final class RedisAntiReplay: ZeroRTTAdmission {
    private let shared: RedisAntiReplayShared
    private let pipeline: RedisPipeline
    /// Whether this connection's Redis knows the script by hash (it does after `SCRIPT LOAD`, until a flush).
    private var scriptLoaded = false

    /// This loop's client; it connects at once (in the background), and after a failure again after the retry delay
    /// (`retryDelays`: from its lower bound, doubling up to its upper one while Redis stays away).
    package init(
        shared: RedisAntiReplayShared, loop: EventLoop, retryDelays: ClosedRange<UInt64> = 10_000_000...500_000_000
    ) {
        self.shared = shared
        var onConnect: () -> [(command: [String], answer: (RedisPipeline.Answer) -> Void)] = { [] }
        pipeline = RedisPipeline(
            loop: loop, addressBook: shared.addressBook, tls: shared.tls,
            staleAfter: max(500_000_000, 4 * shared.endpoint.deadline),
            retryDelays: retryDelays, onError: { [shared] error in shared.withState { $0.storeError = error } },
            onConnect: { onConnect() })
        onConnect = { [weak self] in self?.greeting() ?? [] }
        // The first connect was started before `onConnect` was set: greet it when it is established.
    }

    deinit { if pipeline.loop.inEventLoop { pipeline.stop() } }

    /// Replaces the connection (for the fuzzer: each plan of its hostile Redis starts with the greeting).
    package func reconnect(_ reason: String) { pipeline.restart(reason) }

    /// Closes the connection for good (on the loop): claims are refused from then on.
    package func stop() { pipeline.stop() }

    package var window: Int64 { shared.window }
    package var outlivesProcess: Bool { true }
    package var rememberedSince: Int64? { shared.rememberedSince }
    package var counters: AntiReplayCounters { shared.snapshot }

    /// Whether a claim sent now would go out (for tests).
    package var isConnected: Bool { pipeline.isReady }

    /// Connections replaced so far (for tests).
    package var reconnections: Int { pipeline.restarts }

    /// The most reply bytes the connection held at once (for the fuzzer).
    package var peakBufferedReplyBytes: Int { pipeline.peakBufferedBytes }

    /// The longest reply the connection takes.
    package var maxReplyBytes: Int { pipeline.maxReplyBytes }

    /// Nothing to record: a ticket's use is recorded when its early data is first offered.
    package func issue(_ ticket: TicketDigest) -> Bool { true }

    package func count(_ tally: ZeroRTTTally) { shared.withState { $0.counters.count(tally) } }

    package func admit(_ ticket: TicketDigest, recordingStart: Int64) -> ZeroRTTDecision {
        let decision = shared.withState { state -> ZeroRTTDecision? in
            if state.recent.contains(ticket) {
                state.counters.duplicates += 1
                return .refuse
            }
            // The ticket may predate what the store remembers (GnuTLS checked it against an older start).
            guard let since = state.rememberedSince, since <= recordingStart else {
                state.counters.unknown += 1
                return .refuse
            }
            return nil
        }
        if let decision { return decision }
        guard pipeline.isReady else {
            shared.withState { $0.counters.unavailable += 1 }
            return .refuse
        }
        return .ask
    }

    package func claim(_ ticket: TicketDigest, answer: @escaping (Bool) -> Void) {
        let now = MonotonicClock.now()
        let wallClock = RedisAntiReplayShared.wallClockMilliseconds()
        let request = shared.withState { state -> RedisClaimScript.Request? in
            guard state.recent.insert(ticket) else {  // claimed meanwhile, on another loop or this one
                state.counters.duplicates += 1
                return nil
            }
            guard shared.budget.take(now: Int64(now / 1_000_000)) else {
                state.recent.remove(ticket)
                state.counters.overBudget += 1
                return nil
            }
            state.lastClaimMilliseconds = max(state.lastClaimMilliseconds, wallClock)
            return RedisClaimScript.Request(
                belief: state.belief, nowMilliseconds: wallClock, lastClaimMilliseconds: state.lastClaimMilliseconds,
                ticket: ticket.hex, lifetimeMilliseconds: shared.keyLifetimeMilliseconds)
        }
        guard let request else {
            pipeline.loop.deferUntilIdle { answer(false) }
            return
        }
        send(request, ticket: ticket, deadline: now + shared.endpoint.deadline, byHash: scriptLoaded, answer: answer)
    }

    private func send(
        _ request: RedisClaimScript.Request, ticket: TicketDigest, deadline: UInt64, byHash: Bool,
        answer: @escaping (Bool) -> Void
    ) {
        let command = RedisClaimScript.command(prefix: shared.endpoint.keyPrefix, request, byHash: byHash)
        pipeline.send(command, deadline: deadline) { [weak self] outcome in
            guard let self else { return answer(false) }
            if case .reply(.error(let text)) = outcome, text.hasPrefix("NOSCRIPT"), byHash,
                MonotonicClock.now() < deadline
            {
                scriptLoaded = false  // flushed: the script itself, within the same deadline
                return send(request, ticket: ticket, deadline: deadline, byHash: false, answer: answer)
            }
            answer(settle(outcome, ticket: ticket))
        }
    }

    /// Counts a claim's outcome and keeps the shared state true to it; whether the early data is accepted.
    private func settle(_ outcome: RedisPipeline.Answer, ticket: TicketDigest) -> Bool {
        if case .reply(.error(let text)) = outcome {
            pipeline.restart("Redis answered an error: \(text.prefix(80))")  // OOM, READONLY, LOADING, ...
        }
        let reply: RedisClaimScript.Reply?
        if case .reply(let value) = outcome {
            reply = shared.learn(value)
            if reply == nil, case .reply(let value) = outcome, !Self.isError(value) {
                pipeline.restart("Redis answered the claim with something else")
            }
        } else {
            reply = nil
        }
        return shared.withState { state in
            switch (outcome, reply) {
            case (_, .claimed?):
                return true  // counted as accepted when GnuTLS takes the answer (`ZeroRTTTally.acceptedAfterClaim`)
            case (_, .duplicate?):
                shared.budget.giveBack()
                state.counters.duplicates += 1
            case (_, .memoryChanged?), (_, .marker?):
                shared.budget.giveBack()
                state.recent.remove(ticket)
                state.counters.memoryLost += 1
            case (.timedOut, _):
                state.counters.unavailable += 1  // it may have been claimed: it stays claimed here too
            default:  // not sent, the connection failed, an error or a reply that is not the script's
                shared.budget.giveBack()
                state.recent.remove(ticket)
                state.counters.unavailable += 1
            }
            return false
        }
    }

    private static func isError(_ value: RESPValue) -> Bool {
        if case .error = value { return true }
        return false
    }

    /// What goes first on every new connection: `SELECT` (a database other than 0), `SCRIPT LOAD`, and a read of
    /// the marker, so the relay knows the store's memory before its first claim there.
    private func greeting() -> [(command: [String], answer: (RedisPipeline.Answer) -> Void)] {
        scriptLoaded = false
        var commands: [(command: [String], answer: (RedisPipeline.Answer) -> Void)] = []
        let database = shared.endpoint.database
        if let auth = shared.endpoint.authCommand {
            commands.append(
                (
                    auth,
                    { [weak self] outcome in
                        guard outcome != .reply(.simpleString("OK")), case .reply(let value) = outcome else { return }
                        self?.pipeline.restart(  // the reply, never the password
                            TransportError(
                                .invalidConfiguration,
                                "Redis refused AUTH (\(value)): check the ACL user in the URL and the password in "
                                    + "--anti-replay-password-file or PTT_REDIS_PASSWORD"))
                    }
                ))
        }
        if database != 0 {
            commands.append(
                (
                    ["SELECT", String(database)],
                    { [weak self] outcome in
                        guard outcome != .reply(.simpleString("OK")), case .reply = outcome else { return }
                        self?.pipeline.restart("Redis refused SELECT \(database): \(outcome)")
                    }
                ))
        }
        commands.append(
            (
                ["SCRIPT", "LOAD", RedisClaimScript.source],
                { [weak self] outcome in
                    guard let self else { return }
                    if outcome == .reply(.bulk(Array(RedisClaimScript.sha1.utf8))) {
                        scriptLoaded = true
                    } else if case .reply = outcome {
                        pipeline.restart("Redis refused SCRIPT LOAD: \(outcome)")
                    }
                }
            ))
        let read = RedisClaimScript.command(prefix: shared.endpoint.keyPrefix, shared.markerRead(), byHash: true)
        commands.append(
            (
                read,
                { [weak self] outcome in
                    guard let self, case .reply(let value) = outcome else { return }
                    if shared.learn(value) == nil { pipeline.restart("Redis answered the marker read with \(value)") }
                }
            ))
        return commands
    }
}
