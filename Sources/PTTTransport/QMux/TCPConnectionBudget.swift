/// What one TCP connection (QMux over TLS) may make a relay hold, whatever its peer does — grant no credit, never
/// read, read fast and then stop — at most 256 KiB with its own state, given back when it closes. The relay's
/// accepted connections keep these limits (`TLSStreamPump.SendLimits.relay`); a client's one connection keeps room
/// for a burst (256 KiB queued). So on a relay a write that does not fit in the send queue waits for the peer's
/// credit (over QUIC, ngtcp2 buffers up to 1 MiB per stream first). Each component's cap:
///
/// | component | holds | at most |
/// |---|---|---|
/// | QMux receive window | stream bytes received and not yet read by the application, in chunks of up to 16 KiB | one largest message per connection (`ServerConfiguration.maximumMessageSize` + its prefix: 64 KiB) |
/// | the application's reads in hand | what it read and is still writing (the echo relay: one chunk per stream) | the application's; the echo relay: 16 KiB × 4 streams |
/// | QMux send queue | stream bytes written, waiting for the peer's credit or for room below (writers wait beyond it) | `queuedStreamBytes`, all streams together |
/// | ciphertext waiting for the socket | TLS records taken from the core, not yet written | `pendingCiphertext` of stream data, plus control frames and one record's overhead |
/// | kernel send buffer | bytes written, not yet acknowledged by the peer | 2 × `kernelSendBuffer` (SO_SNDBUF, no autotuning: it grew to 1.4 MiB for a reader that stopped) |
/// | kernel receive buffer | bytes received, not yet read by the relay: the relay reads at once, and after a close it reads and drops what still comes during `TLSStreamPump.closeLinger` | 2 × `kernelReceiveBuffer` (SO_RCVBUF, no autotuning) |
/// | TLS and QMux record reassembly | one partial TLS record and one partial QMux record, in buffers of their size | 2 × 16 KiB |
/// | the connection's own state | GnuTLS session, QMux and driver state, the application's tasks | about 30 KiB on a warm relay |
///
/// Memory freed when a connection ends goes back to the system about a second after (`HeapRelease`, with
/// `ServerConfiguration.releasesFreedMemory`). Measured with `Tests/Peers/qmux_memory_pinner.py`
/// (`TCPMemoryPinTests`). The kernel's buffers cap a connection's throughput far above what push-to-talk needs
/// (audio is 24–32 kbit/s): 16 KiB in flight toward the client is about 1.3 Mbit/s at a 100 ms round trip, a 16 KiB
/// receive window as much from it; a 64 KiB control message takes a few round trips. The receive buffer stays at
/// 16 KiB: with 8 KiB its window fell below loopback's segment size and every window waited for a delayed
/// acknowledgement (the QMux stateful fuzzer ran 5 sequences in 8 s instead of 34).
enum TCPConnectionBudget {
    /// Stream bytes the core holds for the whole connection (all streams) while they wait for the peer's credit or
    /// for room in `pendingCiphertext`. A write past it waits, its bytes still the writer's.
    static let queuedStreamBytes = 16 * 1024
    /// Stream data taken from the core as ciphertext while the socket has not taken it yet.
    static let pendingCiphertext = 16 * 1024
    /// SO_SNDBUF of a relay's accepted connections (the kernel allows twice this).
    static let kernelSendBuffer: Int32 = 8 * 1024
    /// SO_RCVBUF of a relay's accepted connections (the kernel allows twice this).
    static let kernelReceiveBuffer: Int32 = 16 * 1024
}
