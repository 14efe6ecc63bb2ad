import PTTTransport
import TransportCore
import TransportIO

/// What a `RelayChannel` (or a `FanoutRelay`) did, for monitoring a relay and for the benchmark: frames in, copies
/// out, and how long each frame spent inside the relay.
///
/// A frame's forwarding latency runs from the moment the relay's transport delivered it (on the event loop)
/// to the moment the last copy was written to the socket. It excludes the network and the listeners, so it
/// measures the relay itself. Samples are bounded (`maximumSamples`; later ones are dropped until `take()`).
public final class FanoutStatistics: Sendable {
    /// One reading, taken with `take()`.
    public struct Snapshot: Sendable {
        /// Frames received from talkers since the last `take()`.
        public var framesReceived: UInt64 = 0
        /// Copies handed to listeners' transports since the last `take()`.
        public var copiesQueued: UInt64 = 0
        /// Forwarding latency of each frame since the last `take()`, in arrival order.
        public var forwardingLatencies: [Duration] = []
    }

    private let state = Locked(Snapshot())
    private let maximumSamples: Int

    /// Statistics keeping at most `maximumSamples` latency samples between two `take()` calls.
    public init(maximumSamples: Int = 200_000) {
        self.maximumSamples = max(1, maximumSamples)
    }

    /// Returns what was recorded since the previous call and starts afresh.
    public func take() -> Snapshot {
        state.withLock { snapshot in
            defer { snapshot = Snapshot() }
            return snapshot
        }
    }

    func record(copies: Int, latencyNanoseconds: UInt64) {
        state.withLock { snapshot in
            snapshot.framesReceived += 1
            snapshot.copiesQueued += UInt64(copies)
            if snapshot.forwardingLatencies.count < maximumSamples {
                snapshot.forwardingLatencies.append(.nanoseconds(Int64(clamping: latencyNanoseconds)))
            }
        }
    }
}
