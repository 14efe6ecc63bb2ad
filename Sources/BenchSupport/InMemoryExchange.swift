import TransportCore

/// Client connections and a server endpoint exchanging packets in memory, with no delay, no loss and no sockets:
/// the handshake's cost floor (what ngtcp2 and GnuTLS alone need), which the benchmark compares the socket path
/// with. It never reads a clock: the caller's `meter` may, around each side's work.
package final class InMemoryExchange {
    /// Which side's work `meter` wraps.
    package enum Side: Sendable {
        case client
        case server
    }

    package let server: QUICServerEndpoint
    package let serverAddress = SocketAddress(host: "192.0.2.2", port: 4433)!
    /// Virtual time (nanoseconds), advanced by 1 ms per flight.
    package private(set) var now: UInt64 = 1_000 * 1_000_000_000
    /// Wraps every piece of one side's work (creating, receiving, processing events, writing), e.g. to read a
    /// thread CPU clock around it. Default: runs it.
    package var meter: (Side, () -> Void) -> Void = { $1() }
    /// Called with every server connection's events, inside the server's metered work (e.g. to echo).
    package var onServerEvent: (QUICConnection, QUICEvent) -> Void = { _, _ in }
    private var buffer = [UInt8](repeating: 0, count: 65536)

    package init(server: QUICServerEndpoint) {
        self.server = server
    }

    /// A client address for the `index`th client (one port each).
    package func clientAddress(_ index: Int) -> SocketAddress {
        SocketAddress(host: "192.0.2.1", port: UInt16(1024 + index % 60_000))!
    }

    /// Exchanges flights between `client` (at `address`) and the server until `done` holds after a flight, or
    /// nothing moves any more, or 64 flights passed. `onClientEvent` sees the client's events (metered as
    /// client work). Returns whether `done` held. The server's connection is then forgotten, unless
    /// `keepServerConnection`: the endpoint holds it on, as a relay holds a phone that stays connected.
    @discardableResult
    package func run(
        client: QUICConnection, at address: SocketAddress, keepServerConnection: Bool = false,
        onClientEvent: (QUICEvent) -> Void, until done: () -> Bool
    ) -> Bool {
        var connection: QUICConnection?
        var succeeded = false
        for _ in 0..<64 {
            var toServer: [[UInt8]] = []
            meter(.client) { toServer = packets(of: client) }
            now += 1_000_000
            var toClient: [[UInt8]] = []
            meter(.server) {
                for packet in toServer {
                    switch packet.withUnsafeBytes({
                        server.receive(packet: $0, from: address, to: serverAddress, now: now)
                    })
                    {
                    case .deliver(let target):
                        connection = target
                        packet.withUnsafeBytes {
                            target.receive(packet: $0, from: address, to: serverAddress, now: now)
                        }
                    case .accepted(let target):
                        connection = target
                    case .reply(let reply):
                        toClient.append(reply)
                    case .drop, .held, .overflowed:  // the in-process store never holds a flight
                        break
                    }
                }
                if let connection {
                    while let event = connection.nextEvent() { onServerEvent(connection, event) }
                    toClient += packets(of: connection)
                }
            }
            now += 1_000_000
            meter(.client) {
                for packet in toClient {
                    packet.withUnsafeBytes { client.receive(packet: $0, from: serverAddress, to: address, now: now) }
                }
                while let event = client.nextEvent() { onClientEvent(event) }
            }
            if done() {
                succeeded = true
                break
            }
            if toServer.isEmpty && toClient.isEmpty { break }
        }
        if let connection, !keepServerConnection { meter(.server) { server.remove(connection) } }
        return succeeded
    }

    /// Every packet `connection` has to send at `now` (default: the exchange's virtual time), copied out.
    package func packets(of connection: QUICConnection, now: UInt64? = nil) -> [[UInt8]] {
        var packets: [[UInt8]] = []
        let now = now ?? self.now
        buffer.withUnsafeMutableBytes { raw in
            connection.drainPackets(into: raw, now: now) { packets.append(Array($0)) }
        }
        return packets
    }
}
