import Glibc
import Testing
import TransportCore

@testable import TransportIO

/// Both ends of a TCP connection carry the thin-stream timers (`ThinStreamTimers`) where the kernel offers them:
/// a 50 ms floor under the retransmission timeout, ACKs delayed at most 40 ms, linear timeouts.
@Suite("TCP: thin-stream timers on both ends")
struct ThinStreamTimersTests {
    /// `fd`'s timers, checked against the configured ones (the kernel rounds up to its tick; a kernel before 6.15
    /// knows neither option and keeps its defaults).
    static func expectTimers(_ fd: Int32, _ side: String) {
        let timers = ThinStreamTimers.current(of: fd)
        #expect(timers.linear, "\(side): linear timeouts")
        if let rto = timers.rtoMinimum {
            #expect(rto >= ThinStreamTimers.rtoMinimumMicroseconds && rto < 60_000, "\(side): RTO floor \(rto) µs")
        }
        if let delayedAck = timers.delayedAckMaximum {
            #expect(
                delayedAck >= ThinStreamTimers.delayedAckMaximumMicroseconds && delayedAck < 50_000,
                "\(side): delayed-ACK maximum \(delayedAck) µs")
        }
    }

    @Test func theDialedAndTheAcceptedSocketCarryThem() throws {
        let listener = try TCPListener(bindingTo: SocketAddress(parsing: "127.0.0.1:0")!)
        let dialed = try TCPSocket(connectingTo: listener.localAddress)
        Self.expectTimers(dialed.fd, "dialed")
        // The kernel completes a loopback handshake on its own; poll (up to 10 s) rather than assume it did.
        var entry = pollfd(fd: listener.fd, events: Int16(POLLIN), revents: 0)
        #expect(poll(&entry, 1, 10_000) == 1, "the connection arrived")
        let accepted = try #require(try listener.accept())
        Self.expectTimers(accepted.fd, "accepted")
    }
}
