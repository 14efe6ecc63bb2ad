import PTTTransport
import TransportCore

/// A call's audio through an echo relay, as the path scenarios measure it: frame `i` is an 80-byte datagram
/// carrying `i` in its first 4 bytes (big-endian), sent every 20 ms; the phone records when each echo came back.
/// From the arrivals: frames lost (by sequence, never heard back) and the longest gap between echoes, counting a
/// call whose echoes stop early up to when its last frame's echo was due.
struct EchoedCall: Sendable {
    /// One audio frame per interval, as a push-to-talk codec sends them.
    static let frameInterval: Duration = .milliseconds(20)
    /// How long a frame may wait in the send queue before it is stale.
    static let frameExpiry: Duration = .milliseconds(100)

    let clock = ContinuousClock()
    let frames: Int
    private let arrivals = Locked<[(frame: Int, at: ContinuousClock.Instant)]>([])

    /// A call of `duration`, in frames.
    init(lasting duration: Duration) {
        frames = Int(duration / Self.frameInterval)
    }

    /// Frame `index`'s payload.
    static func frame(_ index: Int) -> [UInt8] {
        var frame = [UInt8](repeating: 0x42, count: 80)
        for byte in 0..<4 { frame[byte] = UInt8(truncatingIfNeeded: index >> (8 * (3 - byte))) }
        return frame
    }

    /// Records every echo from `datagrams` until it ends or the task is cancelled.
    func record<Echoes: AsyncSequence & Sendable>(_ datagrams: Echoes) -> Task<Void, Never>
    where Echoes.Element == Datagram {
        Task { [arrivals, clock] in
            do {
                for try await datagram in datagrams where datagram.payload.count >= 4 {
                    let frame = datagram.payload.prefix(4).reduce(0) { $0 << 8 | Int($1) }
                    let now = clock.now
                    arrivals.withLock { $0.append((frame, now)) }
                }
            } catch {}
        }
    }

    /// Sends every frame at its time from `start`; `beforeEach(index)` runs first (a scenario's action mid-call).
    func talk(
        from start: ContinuousClock.Instant, beforeEach: (Int) -> Void = { _ in },
        send: ([UInt8]) throws -> Void
    ) async throws {
        for index in 0..<frames {
            try await Task.sleep(until: start + Self.frameInterval * index, clock: clock)
            beforeEach(index)
            try send(Self.frame(index))
        }
    }

    /// What came back: the arrivals, frames never heard back, and the longest gap between echoes, counted from
    /// `gapsFrom` (the call's start, or its first echo) to when the last frame's echo was due at `rtt`.
    func outcome(
        start: ContinuousClock.Instant, rttMilliseconds rtt: Double, gapsFromStart: Bool
    ) -> (arrivals: [(frame: Int, at: ContinuousClock.Instant)], framesLost: Int, longestGap: Duration) {
        let received = arrivals.withLock { $0 }
        var longestGap = gapsFromStart ? (received.first?.at ?? clock.now) - start : .zero
        for (earlier, later) in zip(received, received.dropFirst()) {
            longestGap = max(longestGap, later.at - earlier.at)
        }
        let lastDue = start + Self.frameInterval * (frames - 1) + .milliseconds(rtt)
        longestGap = max(longestGap, lastDue - (received.last?.at ?? start))
        return (received, frames - Set(received.map(\.frame)).count, longestGap)
    }
}
