import PTTTransport
import TransportCore
import TransportIO

/// The receiving side of capacity-fanout: timestamps every listener's frames on arrival and counts them per
/// listener. Only frames whose sequence number falls in the measured window count.
///
/// The listener connections live on their own event loop and are counted by a datagram handler on that loop
/// (`TransportConnection.setDatagramHandler`): no task hop per frame, so the listeners' own scheduling does not
/// inflate the relay's latency.
final class FanoutListeners: Sendable {
    private struct State {
        var window: Range<UInt32> = 0..<0
        /// Frames of the window each listener received.
        var delivered: [Int] = []
        /// Whether each listener received any frame since `resetHeard()` (the warm-up's membership check).
        var heard: [Bool] = []
        var heardCount = 0
        /// Talker send → listener receive, milliseconds, for frames in the window.
        var latencies: [Double] = []
    }

    private let state = Locked(State())

    /// Counts `connection`'s frames as its transport delivers them (on the listeners' event loop, so the figure
    /// is the relay's latency plus the network, not the listener application's task scheduling). Call once per
    /// listener; returns once the handler is installed.
    func listen(_ connection: TransportConnection) async {
        let index = state.withLock { state in
            state.delivered.append(0)
            state.heard.append(false)
            return state.delivered.count - 1
        }
        await connection.setDatagramHandler { [self] datagram in
            let now = MonotonicClock.now()
            guard let frame = FanoutFrame(datagram.payload) else { return }
            state.withLock { state in
                if !state.heard[index] {
                    state.heard[index] = true
                    state.heardCount += 1
                }
                if state.window.contains(frame.sequence) {
                    state.delivered[index] += 1
                    state.latencies.append(Double(now &- frame.sentAt) / 1_000_000)
                }
            }
        }
    }

    /// Listeners registered so far, and how many heard a frame since `resetHeard()`.
    func membership() -> (listening: Int, heard: Int) {
        state.withLock { ($0.delivered.count, $0.heardCount) }
    }

    func resetHeard() {
        state.withLock { state in
            for index in state.heard.indices { state.heard[index] = false }
            state.heardCount = 0
        }
    }

    /// Starts counting the frames with sequence numbers in `window`.
    func measure(_ window: Range<UInt32>) {
        state.withLock { state in
            state.window = window
            for index in state.delivered.indices { state.delivered[index] = 0 }
            state.latencies.removeAll(keepingCapacity: true)
            state.latencies.reserveCapacity(state.delivered.count * window.count)
        }
    }

    /// Stops counting; returns the deliveries of the window and their latencies.
    func collect() -> (delivered: Int, latencies: [Double]) {
        state.withLock { state in
            state.window = 0..<0
            defer { state.latencies = [] }
            return (state.delivered.reduce(0, +), state.latencies)
        }
    }
}
