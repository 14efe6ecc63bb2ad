import Foundation
import TransportCore
import TransportIO

/// A UDP forwarder between our client and the relay that records every datagram the client sends: how the
/// fuzzer captures real QUIC flights (Initial, 0-RTT, 1-RTT) to mutate. One client at a time; replies go to the
/// client address seen last. Its sockets live on its own thread.
final class UDPRecorder: Sendable {
    /// Where the client should connect.
    let address: SocketAddress
    private let recorded = Locked<[[UInt8]]>([])
    private let stopped = Locked(false)
    private let finished = DispatchSemaphore(value: 0)

    init(forwardingTo relay: SocketAddress) throws {
        let front = try UDPSocket(bindingTo: SocketAddress(host: "127.0.0.1", port: 0)!)
        let back = try UDPSocket(connectingTo: relay)
        address = front.localAddress
        let sockets = UnsafeTransfer((front, back))  // given up here: the thread below is their only user
        let recorded = self.recorded
        let stopped = self.stopped
        let finished = self.finished
        Thread {
            Self.pump(front: sockets.value.0, back: sockets.value.1, recorded: recorded, stopped: stopped)
            finished.signal()
        }.start()
    }

    /// The datagrams recorded since the last call.
    func take() -> [[UInt8]] {
        recorded.withLock { datagrams in
            defer { datagrams = [] }
            return datagrams
        }
    }

    /// Stops forwarding and closes the sockets (waits for the thread).
    func stop() {
        stopped.withLock { $0 = true }
        finished.wait()
    }

    private static func pump(front: UDPSocket, back: UDPSocket, recorded: Locked<[[UInt8]]>, stopped: Locked<Bool>) {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 65_536, alignment: 8)
        defer { buffer.deallocate() }
        var client: SocketAddress?
        while !stopped.withLock({ $0 }) {
            for fd in Poll.readable([front.fd, back.fd], milliseconds: 20) {
                let socket = fd == front.fd ? front : back
                while let received = try? socket.receive(into: buffer) {
                    let bytes = UnsafeRawBufferPointer(rebasing: buffer[..<received.length])
                    if socket === front {
                        client = received.remote
                        recorded.withLock { $0.append(Array(bytes)) }
                        back.send(bytes, to: nil, from: nil, ecn: 0)
                    } else if let client {
                        front.send(bytes, to: client, from: nil, ecn: 0)
                    }
                }
            }
        }
        front.close()
        back.close()
    }
}
