import TransportCore

/// When UDP packets entered an emulated path and when it let them out, as the pump thread saw them: the split of a
/// round trip into what each end took and what the path took, measured rather than assumed. Off until
/// `EmulatedNetwork.recordTimeline()`; bounded by `limit` events (later ones are not kept).
package struct PathTimeline: Sendable {
    /// One packet entering the path (read from a TUN device) or leaving it (written to the other one).
    package struct Event: Sendable, Hashable {
        /// MonotonicClock nanoseconds.
        package var at: UInt64
        package var direction: DelayLine.Direction
        package var sourcePort: UInt16
        package var destinationPort: UInt16
        package var length: Int
        /// True: it entered the path; false: the path released it.
        package var entered: Bool
    }

    package static let limit = 200_000
    package private(set) var events: [Event] = []

    package init() {}

    /// Records `packet` (a UDP packet over IPv4 or IPv6; others are skipped) at `now`.
    package mutating func record(_ packet: [UInt8], direction: DelayLine.Direction, entered: Bool, now: UInt64) {
        guard events.count < Self.limit, let udp = UDPPacket.completeHeader(packet) else { return }
        events.append(
            Event(
                at: now, direction: direction, sourcePort: UDPPacket.endpoint(packet, udp: udp, source: true).port,
                destinationPort: UDPPacket.endpoint(packet, udp: udp, source: false).port, length: packet.count,
                entered: entered))
    }

    /// The events split by client-side port (the source of a client → server packet, the destination of a
    /// server → client one), each list in time order.
    package func byClientPort() -> [UInt16: PathTimeline] {
        var split: [UInt16: PathTimeline] = [:]
        for event in events {
            split[event.direction == .clientToServer ? event.sourcePort : event.destinationPort, default: .init()]
                .events.append(event)
        }
        return split
    }

    /// The packets of one client-side `port` in `direction` that entered the path at or after `since`, in order,
    /// each with when it entered and when the path released it (nil: not yet, or dropped). Packets of a direction
    /// leave in the order they entered (no reordering impairment), so the k-th release is the k-th entry's.
    package func packets(
        _ direction: DelayLine.Direction, clientPort port: UInt16, since: UInt64
    ) -> [(entered: UInt64, left: UInt64?)] {
        let mine = events.filter { event in
            event.direction == direction
                && (direction == .clientToServer ? event.sourcePort : event.destinationPort) == port
        }
        let entered = mine.filter { $0.entered && $0.at >= since }.map(\.at)
        let left = mine.filter { !$0.entered && $0.at >= (entered.first ?? .max) }.map(\.at)
        return entered.indices.map { (entered[$0], $0 < left.count ? left[$0] : nil) }
    }
}
