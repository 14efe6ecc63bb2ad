import NetworkEmulation

/// The capacity-fanout decision, without any I/O: which listener counts to try, whether a step passed, and what
/// to report once the climb stopped.
struct FanoutLadder: Sendable {
    /// What one step (K listeners for a few seconds) measured.
    struct Step: Sendable, Equatable {
        var listeners: Int
        /// Frames the talker sent inside the measured window.
        var framesSent: Int
        /// Frame deliveries counted over all listeners (at most `framesSent * listeners`).
        var delivered: Int
        /// The relay's forwarding latency per frame (its transport delivered the frame → the last copy was
        /// written), milliseconds (nil: nothing was forwarded). This is what the criterion judges.
        var p50Milliseconds: Double?
        var p99Milliseconds: Double?
        /// Talker's `sendDatagram` call to a listener transport's delivery, milliseconds: includes both clients
        /// and every thread wake-up on this machine (informative).
        var endToEndP50Milliseconds: Double? = nil
        var endToEndP99Milliseconds: Double? = nil
        /// The relay loops' thread CPU time over the step divided by the copies forwarded, microseconds.
        var relayCPUMicrosecondsPerCopy: Double? = nil
        /// The kernel floor measured right after the step: a tight `sendmmsg` loop of the same packet size to as
        /// many loopback receivers, thread CPU per packet, microseconds (see `KernelSendFloor`).
        var floorMicrosecondsPerPacket: Double? = nil
        /// The same loop to addresses behind an unread TUN device: the send path without loopback's receive path.
        var sendOnlyFloorMicrosecondsPerPacket: Double? = nil
        /// Bytes per QUIC packet a listener received during the step (the floor sends this size).
        var packetBytes: Int? = nil
        /// What ngtcp2 + GnuTLS alone spend per copy in memory (writing it, reading its share of ACKs, timers),
        /// microseconds of thread CPU (see `FanoutFloor`), measured once per run.
        var libraryFloorMicrosecondsPerCopy: Double? = nil

        /// Relay CPU per copy over what no relay on this library pair and kernel can avoid: the loopback floor
        /// plus the library floor.
        var cpuOverKernelAndLibraryFloor: Double? {
            guard let relay = relayCPUMicrosecondsPerCopy, let floor = floorMicrosecondsPerPacket,
                let library = libraryFloorMicrosecondsPerCopy, floor + library > 0
            else { return nil }
            return relay / (floor + library)
        }

        /// Relay CPU per copy over the loopback floor (target: at most 1.25).
        var cpuOverFloor: Double? {
            guard let relay = relayCPUMicrosecondsPerCopy, let floor = floorMicrosecondsPerPacket, floor > 0 else {
                return nil
            }
            return relay / floor
        }

        /// Loopback makes the sender's CPU deliver each copy to its receiver; without that receive path (remote
        /// listeners), one core at 50 frames/s serves this many listeners.
        func remoteListenersPerCore(framesPerSecond: Int) -> Double? {
            guard let relay = relayCPUMicrosecondsPerCopy, let floor = floorMicrosecondsPerPacket,
                let sendOnly = sendOnlyFloorMicrosecondsPerPacket
            else { return nil }
            let perCopy = relay - max(0, floor - sendOnly)
            guard perCopy > 0 else { return nil }
            return 1_000_000 / perCopy / Double(framesPerSecond)
        }

        /// Lost deliveries as a percentage of the expected `framesSent * listeners` (100 when nothing was expected).
        var lossPercent: Double {
            let expected = framesSent * listeners
            guard expected > 0 else { return 100 }
            return Double(max(0, expected - delivered)) / Double(expected) * 100
        }
    }

    /// A step passes with loss strictly below `maxLossPercent` and p99 strictly below `maxP99Milliseconds`.
    struct Criteria: Sendable {
        var maxLossPercent = 1.0
        var maxP99Milliseconds = 5.0

        func passes(_ step: Step) -> Bool {
            guard let p99 = step.p99Milliseconds else { return false }
            return step.lossPercent < maxLossPercent && p99 < maxP99Milliseconds
        }

        var description: String {
            "a step passes with loss < \(BenchReport.format(maxLossPercent)) % at the listeners and p99 relay "
                + "forwarding latency < \(BenchReport.format(maxP99Milliseconds)) ms"
        }
    }

    /// The full climb (3 s steps), and the short one for quick runs (1 s steps; `--iterations` below 10, e.g. the
    /// smoke test).
    static let full = [10, 25, 50, 75, 100, 150, 250, 500, 1000, 1500, 2000, 3000, 4000, 6000, 8000, 12000, 16000]
    static let quick = [5, 10, 25]

    var counts: [Int]
    var criteria = Criteria()
    private(set) var steps: [Step] = []

    init(counts: [Int], criteria: Criteria = Criteria()) {
        self.counts = counts
        self.criteria = criteria
    }

    /// The listener count to measure next, or nil when the climb is over: the ladder ended, a step lost 1 % or
    /// more (the relay is saturated), or two steps in a row failed. One failing step does not end the climb: on
    /// an idle virtual machine a few frames wait milliseconds for a sleeping vCPU, so latency tails can be worse
    /// at light load than under a steady one, and stopping there would report the machine's idle wake-up, not
    /// the relay's capacity.
    var next: Int? {
        if let last = steps.last, last.lossPercent >= criteria.maxLossPercent { return nil }
        if steps.count >= 2, !steps.suffix(2).contains(where: criteria.passes) { return nil }
        return steps.count < counts.count ? counts[steps.count] : nil
    }

    mutating func record(_ step: Step) { steps.append(step) }

    /// The largest step that passed (nil when none did).
    var lastPassing: Step? { steps.last { criteria.passes($0) } }

    /// The first failing step above the largest passing one (nil while every step passed).
    var firstFailing: Step? {
        steps.first { !criteria.passes($0) && $0.listeners > (lastPassing?.listeners ?? 0) }
    }

    /// The largest listener count sustained: the largest passing step's, 0 when none passed.
    var maxSustained: Int { lastPassing?.listeners ?? 0 }
}
