import BenchSupport
import Foundation
import Glibc
import PTTTransport
import TestSupport
import TransportCore
import TransportIO

/// A fresh QUIC client (the library's sans-IO connection over a plain UDP socket) whose answer to the relay's
/// handshake flight the test holds back: it sends its first flight, reads the relay's flight and keeps everything
/// it would send (its Finished and acknowledgements) until `release`, then runs as any client does. It accepts
/// relay notices, so a draining relay can ask it to move.
final class HeldAnswerClient: @unchecked Sendable {
    // @unchecked Sendable invariant: one step runs at a time (the test awaits each before starting the next).
    let fd: Int32
    let local: SocketAddress
    let remote: SocketAddress
    let core: QUICConnection
    /// The datagrams written and not sent while the answer is held, in order.
    private(set) var held: [[UInt8]] = []
    /// Events in order, as the steps met them (the handshake's completion included).
    private(set) var events: [QUICEvent] = []

    init(port: UInt16) throws {
        (fd, local, remote, core) = try BoundQUICClient.connection(toPort: port) { parameters in
            parameters.acceptsRelayNotices = true
            parameters.handshakeTimeout = 120 * nanosecondsPerSecond  // the test decides how long the answer waits
        }
        for datagram in written() { BoundQUICClient.send(fd, datagram, to: remote) }
    }

    deinit { Glibc.close(fd) }

    /// Every datagram the core has to send now.
    private func written() -> [[UInt8]] { BoundQUICClient.written(by: core) }

    /// Blocking: reads the relay's flight (and its retransmissions) until the client's side of the handshake is
    /// done — its Finished written — holding every datagram instead of sending it. False after `seconds`.
    func holdAnswer(within seconds: Double = 30) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if let datagram = BoundQUICClient.receive(fd, milliseconds: 20) {
                datagram.withUnsafeBytes {
                    core.receive(packet: $0, from: remote, to: local, now: MonotonicClock.now())
                }
            }
            held += written()
            var completed = false
            while let event = core.nextEvent() {
                events.append(event)
                if case .handshakeCompleted = event { completed = true }
            }
            if completed { return true }
        }
        return false
    }

    /// The packet type at the start of the first held datagram (the one the kernel's steering reads).
    var firstHeldType: LongPacketType? {
        held.first?.withUnsafeBytes { LongPacketType(packet: $0) }
    }

    /// Sends the held datagrams, in order.
    func release() {
        for datagram in held { BoundQUICClient.send(fd, datagram, to: remote) }
        held = []
    }

    /// Blocking: runs the connection — sends what it has, reads (20 ms at most), runs a due timer — until `done`
    /// holds for the events met so far (false after `seconds`).
    func run(within seconds: Double, until done: ([QUICEvent]) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            while let event = core.nextEvent() { events.append(event) }
            if done(events) { return true }
            for datagram in written() { BoundQUICClient.send(fd, datagram, to: remote) }
            if let datagram = BoundQUICClient.receive(fd, milliseconds: 20) {
                datagram.withUnsafeBytes {
                    core.receive(packet: $0, from: remote, to: local, now: MonotonicClock.now())
                }
            }
            if let due = core.nextTimeout, due <= MonotonicClock.now() { core.handleTimeout(now: MonotonicClock.now()) }
        }
        return false
    }

    /// Blocking: closes the connection (CONNECTION_CLOSE to the relay).
    func close() {
        core.close(code: 0, reason: "", now: MonotonicClock.now())
        for datagram in written() { BoundQUICClient.send(fd, datagram, to: remote) }
    }
}
