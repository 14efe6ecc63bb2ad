import Foundation
import PTTTransport
import TransportCore
import TransportIO

/// Our client's part in a case: one short connection (a control message and one audio frame, echoed), or a call.
enum OurClient {
    static func make(
        _ path: MatrixPath, _ options: MatrixOptions, fallback: FallbackPolicy = .quicOnly,
        handshakeTimeout: Duration = .seconds(30), chacha20Only: Bool = false, keyLogFile: String? = nil
    ) -> TransportClient {
        make(
            loop: path.clientLoop, options, fallback: fallback, handshakeTimeout: handshakeTimeout,
            chacha20Only: chacha20Only, keyLogFile: keyLogFile)
    }

    /// A client on `loop` (the emulated path's client loop, or one on loopback), trusting the matrix's CA for
    /// `localhost`.
    static func make(
        loop: EventLoop, _ options: MatrixOptions, fallback: FallbackPolicy = .quicOnly,
        handshakeTimeout: Duration = .seconds(30), chacha20Only: Bool = false, keyLogFile: String? = nil
    ) -> TransportClient {
        var configuration = ClientConfiguration(
            serverName: "localhost", trust: .caFile(options.certificateAuthority), fallback: fallback)
        configuration.handshakeTimeout = handshakeTimeout
        // A handshake backing off on a lossy path must not be cut by the idle timer before its own time limit.
        configuration.idleTimeout = max(.seconds(30), handshakeTimeout)
        if chacha20Only { configuration.tlsPriority = TLSPolicy.chacha20Only }
        configuration.keyLogFile = keyLogFile
        return TransportClient(configuration: configuration, loop: loop)
    }

    /// How one short connection went.
    struct Visit: Sendable {
        var handshakeMilliseconds: Double
        var resumption: ResumptionStatus
        var transport: TransportPath
        var state: ResumptionState?
        /// The QUIC version the connection spoke (nil over TCP).
        var quicVersion: QUICVersion?
    }

    /// Connects (resuming `saved` if given; the join message rides in 0-RTT when `early`), waits for the echo of
    /// the control message, sends one frame, waits for a session ticket, and closes.
    static func visit(
        _ client: TransportClient, _ address: ServerAddress, resuming saved: ResumptionState? = nil,
        early: Bool = false, waitForTicket: Bool = true
    ) async throws -> Visit {
        let clock = ContinuousClock()
        let start = clock.now
        let join = Array("join channel 7".utf8)
        let connection = try await client.connect(
            to: address, resuming: saved, earlyMessages: [EarlyMessage(join, replaySafe: early)])
        let handshake = (clock.now - start).matrixMilliseconds
        guard let stream = connection.earlyStream, let echo = try await stream.nextMessage(), echo.bytes == join else {
            await connection.close()
            throw MatrixError("the join message was not echoed")
        }
        try? connection.sendDatagram([UInt8](repeating: 0x5a, count: 80), expiresAfter: .milliseconds(500))
        for _ in 0..<(waitForTicket ? 200 : 0) where connection.resumptionState == nil {
            try await Task.sleep(for: .milliseconds(10))
        }
        let visit = Visit(
            handshakeMilliseconds: handshake, resumption: connection.resumption, transport: connection.path,
            state: connection.resumptionState, quicVersion: await connection.statistics().quicVersion)
        await connection.close()
        return visit
    }
}

extension Duration {
    var matrixMilliseconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) * 1_000 + Double(attoseconds) / 1e15
    }
}
