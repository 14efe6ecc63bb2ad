import TransportIO

/// The transport's clock (CLOCK_MONOTONIC, nanoseconds), for deadlines computed on the caller's thread.
enum MonotonicNow {
    static func nanoseconds() -> UInt64 { MonotonicClock.now() }
}
