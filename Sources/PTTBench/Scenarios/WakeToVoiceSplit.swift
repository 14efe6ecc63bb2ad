import NetworkEmulation
import PTTTransport
import TransportIO

/// Where a woken listener's first audio went, from the emulated path's own timeline (`PathTimeline`): the phone
/// before its first packet entered the path (session, socket, TLS and QUIC set-up, the Initial and 0-RTT written),
/// the path's lateness beyond its one-way delay each way (the pump thread's scheduling), the relay (from its
/// first packet of the wake leaving the path to the packet before the first audio entering it: the 0-RTT accepted,
/// the join and catch-up, the burst's first frames written), and the phone after (the last packet before its first
/// audio leaving the path → the app's first frame).
struct WakeToVoiceSplit {
    /// One woken listener: its network start and first audio (MonotonicClock ns) and the port its socket used.
    struct Wake {
        var start: UInt64
        var firstAudio: UInt64
        var port: UInt16
    }

    var phoneBefore = Samples()
    var pathLateness = Samples()
    var relay = Samples()
    var phoneAfter = Samples()
    var total = Samples()

    init(_ wakes: [Wake], timeline: PathTimeline, oneWay: UInt64) {
        let ports = timeline.byClientPort()
        for wake in wakes {
            guard let timeline = ports[wake.port] else { continue }
            let out = timeline.packets(.clientToServer, clientPort: wake.port, since: wake.start)
            let back = timeline.packets(.serverToClient, clientPort: wake.port, since: wake.start)
            // The first packet of the wake, and the last answer released before the first audio.
            guard let first = out.first, let arrived = first.left,
                let answer = back.last(where: { ($0.left ?? .max) <= wake.firstAudio }), let released = answer.left,
                answer.entered >= arrived
            else { continue }
            func us(_ from: UInt64, _ to: UInt64) -> Double { (Double(to) - Double(from)) / 1000 }
            phoneBefore.append(us(wake.start, first.entered))
            pathLateness.append(us(first.entered, arrived) + us(answer.entered, released) - 2 * Double(oneWay) / 1000)
            relay.append(us(arrived, answer.entered))
            phoneAfter.append(us(released, wake.firstAudio))
            total.append(us(wake.start, wake.firstAudio))
        }
    }

    /// The shares as figures (µs, p50 and max), named `first_audio_split_*`.
    func put(into result: inout ScenarioResult) {
        for (name, samples) in [
            ("phone_before_path", phoneBefore), ("path_lateness", pathLateness), ("relay", relay),
            ("phone_after_path", phoneAfter), ("total", total),
        ] {
            guard let values = samples.percentiles([50, 100]) else { continue }
            result.figure("first_audio_split_\(name)_p50_us", values[0])
            result.figure("first_audio_split_\(name)_max_us", values[1])
        }
    }

    /// `instant` on MonotonicClock (the path's and the transport's clock), through one reading of both clocks.
    static func monotonic(
        _ instant: ContinuousClock.Instant, reading: (mono: UInt64, now: ContinuousClock.Instant)
    )
        -> UInt64
    {
        let back = (reading.now - instant).components
        let nanoseconds = Int64(back.seconds) * 1_000_000_000 + back.attoseconds / 1_000_000_000
        return UInt64(max(0, Int64(reading.mono) - nanoseconds))
    }
}
