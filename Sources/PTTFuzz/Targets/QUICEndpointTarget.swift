import TransportCore
import TransportIO

/// The relay's QUIC server endpoint and the connections it accepts, in this process and without sockets: each
/// input is one datagram (a mutated captured flight — Initial, 0-RTT, 1-RTT — or random bytes) from a random
/// source port, routed by `QUICServerEndpoint.receive` and fed to the connection it names, whose events and
/// packets are then drained as the driver does. A trap here is caught with its input in hex, which the live UDP
/// target (another process) cannot do. "Accepted": a connection took the datagram and stayed open.
enum QUICEndpointTarget {
    /// nil when the certificate or key cannot be loaded.
    static func make(seeds: [[UInt8]], certificates: Certificates) -> ParserTarget? {
        guard let harness = try? EndpointHarness(certificates: certificates) else { return nil }
        return ParserTarget(name: "quic-server-endpoint", seeds: seeds, weight: 2) { input, random in
            harness.feed(input, port: UInt16(1024 + random.below(60_000)))
        }
    }
}

/// One endpoint at a time, replaced every 256 inputs so connections do not pile up.
final class EndpointHarness: @unchecked Sendable {
    // @unchecked Sendable invariant: only the thread running this target's loop touches the harness, one input
    // at a time (ParserTarget.run is synchronous); nothing else holds a reference.
    private let tls: TLSServerContext
    private var endpoint: QUICServerEndpoint
    private var fed = 0
    private var now: UInt64 = 1_000_000_000
    private let local = SocketAddress(host: "127.0.0.1", port: 4433)!
    private var buffer = [UInt8](repeating: 0, count: 65_536)

    init(certificates: Certificates) throws {
        tls = try TLSServerContext(
            certificateChain: PEMFile.read(certificates.chain), privateKey: PEMFile.read(certificates.key),
            ticketKey: nil, earlyDataWindow: 10_000)
        endpoint = try QUICServerEndpoint(parameters: QUICParameters(), tls: tls, secrets: .random())
    }

    func feed(_ datagram: [UInt8], port: UInt16) -> ProbeOutcome {
        fed += 1
        now += 1_000_000
        if fed % 256 == 0,
            let fresh = try? QUICServerEndpoint(
                parameters: QUICParameters(), tls: tls,
                secrets: .random())
        {
            endpoint = fresh
        }
        let remote = SocketAddress(host: "127.0.0.1", port: port)!
        return datagram.withUnsafeBytes { packet -> ProbeOutcome in
            let outcome = endpoint.receive(packet: packet, from: remote, to: local, now: now)
            switch outcome {
            case .drop, .held, .overflowed: return .rejected("dropped")
            case .reply: return .rejected("answered without a connection")
            case .deliver(let connection), .accepted(let connection):
                if case .deliver = outcome { connection.receive(packet: packet, from: remote, to: local, now: now) }
                while connection.nextEvent() != nil {}
                buffer.withUnsafeMutableBytes { out in
                    for _ in 0..<8 where connection.writePacket(into: out, now: now).length > 0 {}
                }
                connection.handleTimeout(now: now)
                if connection.closeReason != nil {
                    _ = connection.takeClosePacket()
                    endpoint.remove(connection)
                    return .rejected("the connection closed")
                }
                return .accepted
            }
        }
    }
}
