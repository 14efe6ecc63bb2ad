import Foundation
import PTTTransport
import TransportCore
import TransportIO

/// A push-to-talk call on one connection: a 20 ms audio frame (an 80-byte datagram carrying its sequence number)
/// and, every second, a control message on a stream; the far end echoes both. Records when each came back.
struct Call {
    /// What came back.
    struct Report: Sendable {
        var framesSent = 0
        /// Distinct frames echoed.
        var framesEchoed = 0
        /// Frames that came back more than once (a retransmitted datagram would).
        var duplicates = 0
        /// Frames echoed more than a second after they were sent (replayed late).
        var lateFrames = 0
        var controlSent = 0
        var controlEchoed = 0
        /// The slowest control echo, in milliseconds.
        var slowestControlMilliseconds = 0.0
        /// Send time (seconds into the call) of each frame, and whether it came back.
        var frames: [(sentAt: Double, echoed: Bool)] = []
        /// The connection was still up at the end.
        var survived = false

        /// Echoed share of the frames sent between `from` and `to` seconds into the call.
        func echoedShare(from: Double, to: Double = .infinity) -> Double {
            let window = frames.filter { $0.sentAt >= from && $0.sentAt < to }
            return window.isEmpty ? 0 : Double(window.filter(\.echoed).count) / Double(window.count)
        }

        /// The longest run of consecutive frames that did not come back.
        var longestGap: Int {
            var longest = 0
            var current = 0
            for frame in frames {
                current = frame.echoed ? 0 : current + 1
                longest = max(longest, current)
            }
            return longest
        }
    }

    private struct Shared {
        var echoedAt: [Int: Double] = [:]
        var duplicates = 0
        var controlLatency: [Int: Double] = [:]
    }

    /// Talks for `seconds`, then waits a grace period for the last echoes.
    static func run(_ connection: TransportConnection, seconds: Double) async throws -> Report {
        let clock = ContinuousClock()
        let start = clock.now
        let elapsed: @Sendable () -> Double = { (clock.now - start).matrixMilliseconds / 1_000 }
        let shared = Locked(Shared())
        let frameCount = Int(seconds * 50)
        var sentAt = [Double](repeating: 0, count: frameCount)
        let control = try await connection.openStream()
        let readers = Task {
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    for await datagram in connection.datagrams where datagram.payload.count >= 4 {
                        let number = datagram.payload.prefix(4).reduce(0) { $0 << 8 | Int($1) }
                        let now = elapsed()
                        shared.withLock { state in
                            if state.echoedAt[number] != nil {
                                state.duplicates += 1
                            } else {
                                state.echoedAt[number] = now
                            }
                        }
                    }
                }
                group.addTask {
                    while let message = try? await control.nextMessage() {
                        let text = String(decoding: message.bytes, as: UTF8.self)
                        guard let number = Int(text.split(separator: " ").last ?? ""), number >= 0 else { continue }
                        let now = elapsed()
                        shared.withLock { $0.controlLatency[number] = now - Double(number) }
                    }
                }
            }
        }
        var report = Report()
        for index in 0..<frameCount {
            try? await clock.sleep(until: start + .milliseconds(20 * index))
            sentAt[index] = elapsed()
            let frame = withUnsafeBytes(of: UInt32(index).bigEndian, Array.init) + [UInt8](repeating: 0x33, count: 76)
            try? connection.sendDatagram(frame, expiresAfter: .milliseconds(100))
            if index % 50 == 0 {
                try? await control.send(Array("floor request \(index / 50)".utf8))
                report.controlSent += 1
            }
        }
        let sentControl = report.controlSent
        for _ in 0..<300 {  // up to 3 s for the control echoes, at least 1 s for the frames
            try await Task.sleep(for: .milliseconds(10))
            let done = shared.withLock { $0.controlLatency.count } == sentControl
            if done && elapsed() > seconds + 1 { break }
        }
        if case .closed = connection.status {} else { report.survived = true }
        readers.cancel()
        let state = shared.withLock { $0 }
        report.framesSent = frameCount
        report.framesEchoed = state.echoedAt.count
        report.duplicates = state.duplicates
        report.controlEchoed = state.controlLatency.count
        report.slowestControlMilliseconds = (state.controlLatency.values.max() ?? 0) * 1_000
        for index in 0..<frameCount {
            let echoed = state.echoedAt[index]
            if let echoed, echoed - sentAt[index] > 1 { report.lateFrames += 1 }
            report.frames.append((sentAt[index], echoed != nil))
        }
        return report
    }
}
