import BenchSupport
import ChildProcesses
import TransportCore

/// What forwarding one copy of an audio frame costs ngtcp2 + GnuTLS alone, beside the kernel's floor: one server
/// endpoint and `listeners` client connections exchanging packets in memory (`InMemoryExchange` for the
/// handshakes, then direct hand-over), no sockets, no event loop. Per frame the server queues one DATAGRAM per
/// listener and writes its packets; the listeners acknowledge as ngtcp2 does (every second packet, or at their
/// ACK-delay timer) and the server reads those ACKs and runs its timers. Only the server's work is metered (thread
/// CPU clock): that is the part of a relay's CPU per copy no transport built on this library pair can avoid.
struct FanoutFloor: Sendable {
    /// Server CPU per copy, nanoseconds: writing the copy's packet plus its share of reading ACKs and timers.
    var nanosecondsPerCopy: Double
    /// Of which writing the packets (queue, encrypt, seal).
    var writeNanosecondsPerCopy: Double
    /// Packets of ACKs the server read per copy.
    var acknowledgementsPerCopy: Double

    /// The listeners of a full run: the capacity the relay is built for on a 2-core machine.
    static let listeners = 1_000

    /// Runs on a thread of its own; `listeners` is capped at 1,000. The count matters: with many connections each
    /// pass over one touches memory the caches no longer hold, as on a relay.
    static func measure(
        certificate: String, privateKey: String, ca: String, listeners: Int, frames: Int = 150
    ) async throws -> FanoutFloor {
        let capped = min(1_000, listeners)
        return try await InMemoryPeers.onOwnThread { () throws(TransportError) in
            try run(certificate: certificate, privateKey: privateKey, ca: ca, listeners: capped, frames: frames)
        }
    }

    private struct Pair {
        let client: QUICConnection
        let server: QUICConnection
        let address: SocketAddress
    }

    private static func run(
        certificate: String, privateKey: String, ca: String, listeners: Int, frames: Int
    ) throws(TransportError) -> FanoutFloor {
        let peers = try InMemoryPeers(certificate: certificate, privateKey: privateKey, ca: ca, earlyDataWindow: nil)
        let (exchange, clientTLS) = (peers.exchange, peers.clientTLS)
        var pairs: [Pair] = []
        for index in 0..<listeners {
            if let pair = try connect(exchange, clientTLS, index: index) { pairs.append(pair) }
        }
        guard !pairs.isEmpty else {
            throw TransportError(.internalError, "no in-memory listener completed its handshake")
        }
        var now = exchange.now
        let frame = [UInt8](repeating: 0x5a, count: 80)
        var serverNanoseconds = 0.0
        var writeNanoseconds = 0.0
        var acknowledgements = 0
        var copies = 0
        for _ in 0..<frames {
            now += 20_000_000  // 50 frames per second
            // The server: one copy per listener, each connection's packets written (metered).
            var toClients: [[[UInt8]]] = []
            let writeStart = CPUTime.thread()
            for pair in pairs {
                try? pair.server.sendDatagram(frame, deadline: now + 100_000_000)
                toClients.append(exchange.packets(of: pair.server, now: now))
            }
            let written = CPUTime.thread() - writeStart
            writeNanoseconds += written * 1e9
            serverNanoseconds += written * 1e9
            copies += pairs.count
            // The listeners: read, acknowledge when ngtcp2 wants to (not metered).
            now += 1_000_000
            var toServer: [[[UInt8]]] = []
            for (pair, packets) in zip(pairs, toClients) {
                for packet in packets {
                    packet.withUnsafeBytes {
                        pair.client.receive(packet: $0, from: exchange.serverAddress, to: pair.address, now: now)
                    }
                }
                while pair.client.nextEvent() != nil {}
                if let deadline = pair.client.nextTimeout, deadline <= now { pair.client.handleTimeout(now: now) }
                toServer.append(exchange.packets(of: pair.client, now: now))
            }
            // The server: the ACKs, its events and timers, and whatever it writes in answer (metered).
            now += 1_000_000
            let readStart = CPUTime.thread()
            for (pair, packets) in zip(pairs, toServer) {
                for packet in packets {
                    packet.withUnsafeBytes {
                        pair.server.receive(packet: $0, from: pair.address, to: exchange.serverAddress, now: now)
                    }
                    acknowledgements += 1
                }
                while pair.server.nextEvent() != nil {}
                if let deadline = pair.server.nextTimeout, deadline <= now { pair.server.handleTimeout(now: now) }
                _ = exchange.packets(of: pair.server, now: now)
            }
            serverNanoseconds += (CPUTime.thread() - readStart) * 1e9
        }
        return FanoutFloor(
            nanosecondsPerCopy: serverNanoseconds / Double(copies),
            writeNanosecondsPerCopy: writeNanoseconds / Double(copies),
            acknowledgementsPerCopy: Double(acknowledgements) / Double(copies))
    }

    /// One listener's handshake, until the client holds its session ticket (the server's post-handshake
    /// packets are then acknowledged and quiet); nil when it did not finish.
    private static func connect(
        _ exchange: InMemoryExchange, _ tls: TLSClientContext, index: Int
    ) throws(TransportError) -> Pair? {
        let address = exchange.clientAddress(index)
        let client = try QUICConnection(
            clientWith: QUICParameters(), tls: tls, serverName: "localhost", local: address,
            remote: exchange.serverAddress, now: exchange.now, resumption: nil)
        var server: QUICConnection?
        exchange.onServerEvent = { connection, _ in server = connection }
        var completed = false
        var ticket = false
        let done = exchange.run(
            client: client, at: address,
            onClientEvent: { event in
                switch event {
                case .handshakeCompleted: completed = true
                case .sessionTicket: ticket = true
                default: break
                }
            },
            until: { completed && ticket && server?.isHandshakeCompleted == true })
        guard done, let server else { return nil }
        return Pair(client: client, server: server, address: address)
    }
}
