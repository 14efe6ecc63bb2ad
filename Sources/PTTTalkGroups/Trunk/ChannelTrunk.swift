import PTTTransport
import TransportCore
import TransportIO

/// One channel's side of the fleet's trunks, shared by the channel's loops:
///
/// - where a local talker's frames go besides the local members (`out`: one datagram per following peer relay);
/// - at a relay that is not the group's home, the floor as the home decided it (`relayed`): the talker (on this
///   relay or another) and its burst, whose frames this relay admits, records and fans out;
/// - at the home, the members of other relays that asked for the floor (`remote`), each seated in the channel's
///   floor under a connection ID of its own that no connection has.
final class ChannelTrunk: Sendable {
    /// The floor as the home granted it, for a relay that is not the home.
    struct Relayed: Sendable, Equatable {
        let talker: MemberIdentity
        let burst: UInt64
        /// The relay whose decision this is (the home).
        let home: String
    }

    /// A member of another relay seated in this channel's floor at the home.
    struct RemoteSeat: Sendable {
        let id: TransportConnection.ID
        let relay: String
        /// The role its relay said with its latest request.
        var role: FloorRole
    }

    private let out: @Sendable ([UInt8]) -> Void
    private let state = Locked<(relayed: Relayed?, remote: [MemberIdentity: RemoteSeat])>((nil, [:]))
    /// Frames from a trunk whose burst this relay has no grant for yet: the talker's relay sent them on its trunk
    /// before the home's grant crossed the home's trunk (two paths, no order between them). Held until the grant
    /// comes, at most `holdLimit` frames for at most `holdNanoseconds` each.
    private let held = Locked<[(burst: UInt64, frame: [UInt8], at: UInt64)]>([])
    /// Members here whose floor request went to the home and is not decided yet (asked, or waiting in the home's
    /// line), by the home asked: answered here when that home goes away, so they ask again.
    private let pending = Locked<[MemberIdentity: String]>([:])
    /// A grant from a relay this relay's view does not name the home yet (the view follows a re-home up to a
    /// heartbeat later than the new home's): applied once the view names it, dropped after `holdNanoseconds`.
    private let stashed = Locked<(taken: Relayed, at: UInt64)?>(nil)
    static let holdLimit = 64
    static let holdNanoseconds: UInt64 = 1_000_000_000

    /// A channel's trunk side whose local talker's frames go to `out`.
    init(out: @escaping @Sendable ([UInt8]) -> Void) { self.out = out }

    /// Any loop: a local talker's admitted frame, to the peer relays.
    func send(_ frame: [UInt8]) { out(frame) }

    /// The floor as the home decided it (nil: idle, or this relay is the home).
    var relayed: Relayed? { state.withLock { $0.relayed } }

    /// Sets (or clears) the floor as the home decided it; returns what it was.
    @discardableResult
    func setRelayed(_ relayed: Relayed?) -> Relayed? {
        state.withLock { state in
            defer { state.relayed = relayed }
            return state.relayed
        }
    }

    /// `member`'s request went to `home`.
    func asked(_ member: MemberIdentity, home: String) { pending.withLock { $0[member] = home } }

    /// `member`'s request was decided (granted, denied) or withdrawn.
    func answered(_ member: MemberIdentity) { pending.withLock { _ = $0.removeValue(forKey: member) } }

    /// The members whose request `home` (nil: any home) will not decide any more; forgotten here.
    func abandon(home: String?) -> [MemberIdentity] {
        pending.withLock { pending in
            let gone = pending.filter { home == nil || $0.value == home }.map(\.key)
            for member in gone { pending[member] = nil }
            return gone
        }
    }

    /// Keeps a grant from a relay that is not the home in this relay's view yet.
    func stash(_ taken: Relayed) { stashed.withLock { $0 = (taken, MonotonicClock.now()) } }

    /// The stashed grant, when `home` sent it and it is recent; forgotten either way.
    func unstash(home: String) -> Relayed? {
        stashed.withLock { stashed in
            defer { stashed = nil }
            guard let (taken, at) = stashed, taken.home == home,
                MonotonicClock.now() &- at <= Self.holdNanoseconds
            else { return nil }
            return taken
        }
    }

    /// The stashed grant of `burst` ended before the view followed: forgotten.
    func unstash(burst: UInt64) { stashed.withLock { if $0?.taken.burst == burst { $0 = nil } } }

    /// Holds a trunk frame of `burst`, which no grant admits yet (the oldest goes beyond the limit).
    func hold(_ frame: [UInt8], burst: UInt64, now: UInt64) {
        held.withLock { held in
            held.removeAll { now &- $0.at > Self.holdNanoseconds }
            if held.count >= Self.holdLimit { held.removeFirst() }
            held.append((burst, frame, now))
        }
    }

    /// Takes the held frames of `burst` (in arrival order), once its grant came; the others stay.
    func takeHeld(burst: UInt64, now: UInt64) -> [[UInt8]] {
        held.withLock { held in
            guard !held.isEmpty else { return [] }
            let mine = held.filter { $0.burst == burst && now &- $0.at <= Self.holdNanoseconds }.map(\.frame)
            held.removeAll { $0.burst == burst || now &- $0.at > Self.holdNanoseconds }
            return mine
        }
    }

    /// Whether `member`'s frames are admitted by the home's grant.
    func admits(_ member: MemberIdentity) -> Bool { state.withLock { $0.relayed?.talker == member } }

    /// The seat of `member` of `relay` in `role` (made on first use); `changed` when it is new or its role changed
    /// (the floor must seat it so).
    func seat(_ member: MemberIdentity, of relay: String, role: FloorRole) -> (seat: RemoteSeat, changed: Bool) {
        state.withLock { state in
            if var seat = state.remote[member], seat.relay == relay {
                guard seat.role != role else { return (seat, false) }
                seat.role = role
                state.remote[member] = seat
                return (seat, true)
            }
            let seat = RemoteSeat(id: .next(), relay: relay, role: role)
            state.remote[member] = seat
            return (seat, true)
        }
    }

    /// The seat of `member`, when it is a member of another relay seated here.
    func remoteSeat(of member: MemberIdentity) -> RemoteSeat? { state.withLock { $0.remote[member] } }

    /// Removes the seats of `relay`'s members (its trunk went down); returns their IDs.
    func removeSeats(of relay: String) -> [TransportConnection.ID] {
        state.withLock { state in
            let gone = state.remote.filter { $0.value.relay == relay }
            for member in gone.keys { state.remote[member] = nil }
            return gone.values.map(\.id)
        }
    }
}
