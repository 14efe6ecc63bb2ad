import Glibc

/// The clock the transport runs on: CLOCK_MONOTONIC in nanoseconds (ngtcp2's `ngtcp2_tstamp` unit).
package enum MonotonicClock {
    package static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }
}
