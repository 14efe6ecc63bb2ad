internal import CTransportShims
import Glibc

/// The retransmission timers of a push-to-talk TCP connection, set per socket on both ends (best effort: a kernel
/// without an option keeps its default).
///
/// A talk-group connection is a thin stream: a floor request, its grant, a frame every 20 ms — rarely more than one
/// or two segments in flight, so a lost segment is never found by duplicate ACKs or RACK; only a timer resends it.
/// Linux's timers are made for bulk transfers: the retransmission timeout is the smoothed RTT plus at least 200 ms
/// (`tcp_rto_min`), and a tail-loss probe for a lone segment waits two RTTs plus 200 ms. At 100 ms RTT a lost floor
/// request was resent after 300 ms and granted after 400 ms.
///
/// - `TCP_RTO_MIN_US` (Linux 6.15): the floor under the retransmission timeout, 50 ms instead of 200 ms, so a lone
///   lost segment is resent one RTT plus 50 ms (plus the measured variation) after it left. The timeout still
///   follows the measured variation, so a jittery path keeps a longer one.
/// - `TCP_DELACK_MAX_US` (Linux 6.15): a delayed ACK waits at most 40 ms (Linux's shortest delay) instead of up
///   to 200 ms, so the peer's timeout above does not fire on an ACK this side is still holding.
/// - `TCP_THIN_LINEAR_TIMEOUTS`: while fewer than four segments are in flight, the first six timeouts do not
///   double, so a segment lost twice is not held for seconds.
///
/// What no socket option reaches: the first SYN's timeout (1 s, `TCP_TIMEOUT_INIT`) and the SYN retries are the
/// kernel's (a BPF `sock_ops` program could set them); a lost SYN or SYN-ACK costs a second.
enum ThinStreamTimers {
    /// `TCP_RTO_MIN_US` (Linux 6.15's uapi; not in older headers).
    static let rtoMinimumOption: Int32 = 45
    /// `TCP_DELACK_MAX_US` (Linux 6.15's uapi; not in older headers).
    static let delayedAckMaximumOption: Int32 = 46
    /// The retransmission timeout's floor, in microseconds.
    static let rtoMinimumMicroseconds: Int32 = 50_000
    /// The longest delay of an ACK, in microseconds.
    static let delayedAckMaximumMicroseconds: Int32 = 40_000

    /// Sets the three options on `fd`, ignoring a kernel that refuses one.
    static func apply(to fd: Int32) {
        let size = socklen_t(MemoryLayout<Int32>.size)
        var rto = rtoMinimumMicroseconds
        _ = setsockopt(fd, Int32(IPPROTO_TCP), rtoMinimumOption, &rto, size)
        var delayedAck = delayedAckMaximumMicroseconds
        _ = setsockopt(fd, Int32(IPPROTO_TCP), delayedAckMaximumOption, &delayedAck, size)
        var one: Int32 = 1
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_THIN_LINEAR_TIMEOUTS, &one, size)
    }

    /// The values `fd` holds now (nil: the kernel does not know the option), for tests and diagnostics.
    static func current(of fd: Int32) -> (rtoMinimum: Int32?, delayedAckMaximum: Int32?, linear: Bool) {
        func read(_ option: Int32) -> Int32? {
            var value: Int32 = 0
            var size = socklen_t(MemoryLayout<Int32>.size)
            return getsockopt(fd, Int32(IPPROTO_TCP), option, &value, &size) == 0 ? value : nil
        }
        return (
            read(rtoMinimumOption), read(delayedAckMaximumOption), (read(TCP_THIN_LINEAR_TIMEOUTS) ?? 0) != 0
        )
    }
}
