import Foundation
import PTTTransport
import TransportCore

/// Real first flights of our own `TransportClient`, captured through `UDPRecorder` and `TCPRecorder`: what the
/// live targets mutate, and where the ClientHello and resumption seeds come from.
struct CapturedFlights: Sendable {
    /// Client datagrams of a full QUIC handshake: the first flight (Initial) and the long-header rest.
    var quicFull: [[UInt8]] = []
    /// Client datagrams of a resumed connection's first flight (Initial with 0-RTT).
    var quicResumed: [[UInt8]] = []
    /// Client 1-RTT (short header) packets after a handshake.
    var quicShortHeader: [[UInt8]] = []
    /// TCP first flights: a full handshake's ClientHello, and a resumed one (PSK and early data).
    var tcp: [[UInt8]] = []
    /// Serialized resumption states the connections produced.
    var resumptionStates: [[UInt8]] = []

    /// Every QUIC datagram captured.
    var quicAll: [[UInt8]] { quicFull + quicResumed + quicShortHeader }

    /// A one-line summary for the report's notes.
    var summary: String {
        "captured \(quicFull.count) full-handshake, \(quicResumed.count) resumed and \(quicShortHeader.count) 1-RTT "
            + "client datagrams, \(tcp.count) TCP first flights, \(resumptionStates.count) resumption states"
    }

    /// Runs a full and a resumed connection over QUIC and over TCP through the recorders, echoing a message and
    /// a datagram on each.
    static func capture(_ relay: RelayUnderTest, certificates: Certificates) async throws -> CapturedFlights {
        var flights = CapturedFlights()
        let udp = try UDPRecorder(forwardingTo: relay.address)
        let tcp = try TCPRecorder(forwardingTo: relay.address)
        defer {
            udp.stop()
            tcp.stop()
        }
        let udpAddress = ServerAddress(host: "127.0.0.1", port: udp.address.port)
        let tcpAddress = ServerAddress(host: "127.0.0.1", port: tcp.address.port)

        let state = try await exchange(udpAddress, .quicOnly, certificates: certificates, resuming: nil) {
            flights.quicFull = udp.take()
        }
        let afterHandshake = udp.take()
        flights.quicShortHeader = afterHandshake.filter { ($0.first ?? 0x80) & 0x80 == 0 }
        flights.quicFull += afterHandshake.filter { ($0.first ?? 0) & 0x80 != 0 }  // the client's Handshake flight
        if let state {
            flights.resumptionStates.append(state.serialized())
            _ = try await exchange(udpAddress, .quicOnly, certificates: certificates, resuming: state) {
                flights.quicResumed = udp.take()
            }
        }
        let tcpState = try await exchange(tcpAddress, .tcpOnly, certificates: certificates, resuming: nil) {}
        if let tcpState {
            flights.resumptionStates.append(tcpState.serialized())
            _ = try await exchange(tcpAddress, .tcpOnly, certificates: certificates, resuming: tcpState) {}
        }
        try await Task.sleep(for: .milliseconds(200))  // the recorder files a flight when its connection ends
        flights.tcp = tcp.take()
        return flights
    }

    /// One connection: `afterConnect` runs as soon as it is ready; a message and a datagram are echoed; returns
    /// the resumption state once the ticket arrived (waits at most 2 s for it).
    private static func exchange(
        _ address: ServerAddress, _ fallback: FallbackPolicy, certificates: Certificates,
        resuming: ResumptionState?, afterConnect: () -> Void
    ) async throws
        -> ResumptionState?
    {
        // A generous handshake timeout: this records flights to replay, it measures nothing, and a run beside the
        // whole test suite once took more than 5 s to complete this handshake with its child relay.
        var configuration = ClientConfiguration(
            serverName: "localhost", trust: .caFile(certificates.authority),
            handshakeTimeout: .seconds(20))
        configuration.fallback = fallback
        configuration.tcpFastOpen = false
        let connection = try await TransportClient(configuration: configuration).connect(
            to: address, resuming: resuming, earlyMessages: [EarlyMessage(Array("early".utf8), replaySafe: true)])
        afterConnect()
        if let stream = connection.earlyStream {
            var messages = stream.messages.makeAsyncIterator()
            _ = try await messages.next()
            try await stream.send(Array("one more".utf8))
            _ = try await messages.next()
        }
        try? connection.sendDatagram(Array("captured datagram".utf8))
        let deadline = ContinuousClock.now + .seconds(2)
        while connection.resumptionState == nil && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        try await Task.sleep(for: .milliseconds(50))
        let state = connection.resumptionState
        await connection.close()
        return state
    }
}
