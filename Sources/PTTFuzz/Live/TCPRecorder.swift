import Foundation
import TransportCore
import TransportIO

/// A TCP forwarder between our client and the relay that records, per connection, the client's first flight
/// (every byte it sent before the relay's first byte): how the fuzzer captures real TLS ClientHellos. One
/// connection at a time. Its sockets live on its own thread.
final class TCPRecorder: Sendable {
    /// Where the client should connect.
    let address: SocketAddress
    private let flights = Locked<[[UInt8]]>([])
    private let stopped = Locked(false)
    private let finished = DispatchSemaphore(value: 0)

    init(forwardingTo relay: SocketAddress) throws {
        let listener = try TCPListener(bindingTo: SocketAddress(host: "127.0.0.1", port: 0)!)
        address = listener.localAddress
        let transfer = UnsafeTransfer(listener)  // given up here: the thread below is its only user
        let flights = self.flights
        let stopped = self.stopped
        let finished = self.finished
        Thread {
            Self.serve(listener: transfer.value, relay: relay, flights: flights, stopped: stopped)
            finished.signal()
        }.start()
    }

    /// The first flights recorded since the last call, one per connection.
    func take() -> [[UInt8]] {
        flights.withLock { recorded in
            defer { recorded = [] }
            return recorded
        }
    }

    /// Stops forwarding and closes the sockets (waits for the thread).
    func stop() {
        stopped.withLock { $0 = true }
        finished.wait()
    }

    private static func serve(
        listener: TCPListener, relay: SocketAddress, flights: Locked<[[UInt8]]>,
        stopped: Locked<Bool>
    ) {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 65_536, alignment: 8)
        defer { buffer.deallocate() }
        while !stopped.withLock({ $0 }) {
            guard !Poll.readable([listener.fd], milliseconds: 20).isEmpty, let client = try? listener.accept(),
                let server = try? TCPSocket(connectingTo: relay), Poll.writable(server.fd, milliseconds: 2000)
            else { continue }
            var flight: [UInt8] = []
            var serverSpoke = false
            pumping: while !stopped.withLock({ $0 }) {
                for fd in Poll.readable([client.fd, server.fd], milliseconds: 20) {
                    let (from, to) = fd == client.fd ? (client, server) : (server, client)
                    guard let count = try? from.read(into: buffer), count > 0 else { break pumping }
                    let bytes = UnsafeRawBufferPointer(rebasing: buffer[..<count])
                    if from === client && !serverSpoke { flight += bytes }
                    if from === server { serverSpoke = true }
                    if !writeAll(bytes, to: to) { break pumping }
                }
            }
            if !flight.isEmpty { flights.withLock { $0.append(flight) } }
            client.close()
            server.close()
        }
        listener.close()
    }

    /// Writes every byte (waiting for room); false when the connection failed.
    static func writeAll(_ bytes: UnsafeRawBufferPointer, to socket: TCPSocket) -> Bool {
        var offset = 0
        while offset < bytes.count {
            guard let written = try? socket.write(UnsafeRawBufferPointer(rebasing: bytes[offset...])) else {
                return false
            }
            if written == 0 && !Poll.writable(socket.fd, milliseconds: 1000) { return false }
            offset += written
        }
        return true
    }
}
