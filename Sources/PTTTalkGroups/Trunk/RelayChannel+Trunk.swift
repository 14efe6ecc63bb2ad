import PTTTransport
import TransportCore
import TransportIO

extension RelayChannel {
    /// On the first loop (where trunks live): a frame of this group a peer relay sent; false when it was dropped.
    ///
    /// A frame of a burst no grant admits here yet is held (the talker's relay may send it before the home's grant
    /// arrives, on another trunk) and forwarded once the grant came, before the frames that follow it.
    func receiveRelayed(_ frame: [UInt8]) -> Bool {
        guard let trunk, let header = AudioFrameHeader.peek(frame) else { return cores[0].forwardRelayed(frame) }
        let now = MonotonicClock.now()
        let relayed = trunk.relayed?.burst
        if relayed == header.burst {
            for early in trunk.takeHeld(burst: header.burst, now: now) { _ = cores[0].forwardRelayed(early) }
        }
        if cores[0].forwardRelayed(frame) { return true }
        guard relayed != header.burst else { return false }  // admitted burst, refused frame (a duplicate...)
        trunk.hold(frame, burst: header.burst, now: now)
        return true
    }

    /// At the home: `member` of `relay`, in `role` (as its relay says), asks for the floor: seated in the floor on
    /// first use, and seated again when its role changed, so this floor decides every cause, #5 included.
    func requestFloor(
        remote member: MemberIdentity, of relay: String, role: FloorRole, _ request: FloorRequest
    ) -> FloorRequestResult? {
        guard let floor, let trunk else { return nil }
        let (seat, changed) = trunk.seat(member, of: relay, role: role)
        if changed { floor.join(member, role: role, id: seat.id, slot: 0) }
        return floor.request(seat.id, request)
    }

    /// Who holds this group's floor as this relay knows it (nil: nobody): its own floor's talker, or at a relay
    /// that is not the home, the talker the home granted.
    var holderInFleet: MemberIdentity? { talkerIdentity ?? trunk?.relayed?.talker }

    /// At the home: `member` of another relay releases the floor or its place in line.
    func releaseFloor(remote member: MemberIdentity) {
        guard let floor, let seat = trunk?.remoteSeat(of: member) else { return }
        _ = floor.release(seat.id)
    }

    /// At the home: `relay`'s trunk went down; its members lose the floor and their places in line.
    func dropSeats(of relay: String) {
        guard let floor, let trunk else { return }
        for id in trunk.removeSeats(of: relay) { floor.leave(id, reason: .closed) }
    }

    /// Not the home: the home granted `talker` the floor for `burst`; its frames are admitted and recorded here.
    func relayedTaken(burst: UInt64, talker: MemberIdentity, home: String) {
        self.burst?.adopt(burst, talker: talker, now: MonotonicClock.now())
        trunk?.setRelayed(ChannelTrunk.Relayed(talker: talker, burst: burst, home: home))
        let core = cores[0]
        core.loop.execute { [trunk] in  // frames of this burst that came before its grant
            for early in trunk?.takeHeld(burst: burst, now: MonotonicClock.now()) ?? [] {
                _ = core.forwardRelayed(early)
            }
        }
    }

    /// Not the home: the floor the home granted ended (nil `burst`: whichever it was). Returns what it was.
    @discardableResult
    func relayedReleased(burst: UInt64?) -> ChannelTrunk.Relayed? {
        guard let trunk, let current = trunk.relayed, burst == nil || current.burst == burst else { return nil }
        trunk.setRelayed(nil)
        self.burst?.end(now: MonotonicClock.now())
        return current
    }
}
