internal import CTransportShims
import Glibc
import TransportCore

/// Reads the datagrams waiting on one UDP socket several at a time (`recvmmsg`): a relay's socket receives a
/// stream of small acknowledgements from its listeners, and one system call per burst instead of per packet is
/// most of what reading them costs the kernel side.
///
/// - Important: Loop thread only (one batch per socket, reused every turn).
package final class UDPReceiveBatch {
    /// Datagrams read per `recvmmsg` call.
    package static let defaultSlots = 32
    /// The largest datagram a slot holds: the largest UDP payload over IPv4 or IPv6 (nothing is ever cut short).
    package static let slotSize = 65_536

    private let batch: OpaquePointer
    package let socket: UDPSocket

    /// A batch of `slots` (1...256) datagrams for `socket`.
    package init(socket: UDPSocket, slots: Int = UDPReceiveBatch.defaultSlots) throws(TransportError) {
        guard (1...256).contains(slots), let batch = ptt_udp_recv_batch_create(slots, Self.slotSize) else {
            throw TransportError(
                .invalidConfiguration,
                "a UDP receive batch holds 1 to 256 datagrams (asked for \(slots)), or memory ran out")
        }
        self.batch = batch
        self.socket = socket
    }

    deinit { ptt_udp_recv_batch_destroy(batch) }

    /// Reads up to `limit` waiting datagrams with one system call and hands each to `body` (its bytes are valid
    /// only during the call). Returns how many were read: 0 when none was waiting.
    ///
    /// - Throws: `systemCallFailed` (or `unreachable` for an ICMP error) when the call failed with nothing read;
    ///   the caller decides whether to go on (a server does: one peer's ICMP error must not stop it).
    package func receive(
        upTo limit: Int, _ body: (UnsafeRawBufferPointer, UDPSocket.Received) -> Void
    ) throws(TransportError) -> Int {
        guard !socket.isClosed else { return 0 }
        let count = ptt_udp_recv_batch_receive(batch, socket.fd, max(0, limit))
        if count < 0 { throw UDPSocket.receiveFailure(-count) }
        var datagram = ptt_udp_received()
        for index in 0..<Int(count) {
            ptt_udp_recv_batch_get(batch, index, &datagram)
            if datagram.truncated != 0 { continue }  // cannot happen with 64 KiB slots; never hand on a cut packet
            let received = socket.received(
                length: datagram.length, remote: &datagram.remote, remoteLength: datagram.remotelen,
                local: &datagram.local, localLength: datagram.locallen, ecn: datagram.ecn)
            body(UnsafeRawBufferPointer(start: datagram.data, count: datagram.length), received)
        }
        return Int(count)
    }
}
