import Foundation
import PTTTransport
import TransportCore
import TransportIO

/// The QMux cases (draft-ietf-quic-qmux-01 over TLS 1.3 on TCP), on loopback: QMux rides on TCP, whose loss and
/// delay are TCP's business, so these cells need no emulated path. Our client against our relay, and moq-dev's
/// QMux against ours, judged from the endpoints and, for moq-dev's client, from the wire (its bridge reads every
/// record both sides send).
enum QMuxCases {
    static func run(
        _ testCase: MatrixCase, _ pairing: Pairing, _ options: MatrixOptions, _ moq: Result<MoqPeers, MatrixError>?
    ) async -> Outcome {
        switch pairing {
        case .aioquicClient, .aioquicServer:
            return .unsupported("aioquic speaks QUIC only, not QMux")
        case .moqServer:
            return await theirServer(moq)
        case .ours:
            return await ours(testCase, options)
        case .moqClient:
            switch moq {
            case .success(let peers): return await theirClient(testCase, options, peers)
            case .failure(let error): return .unsupported("\(error)")
            case nil: return .unsupported("moq-ffi was not looked for")
            }
        }
    }

    // MARK: - Our client against our relay

    private static func ours(_ testCase: MatrixCase, _ options: MatrixOptions) async -> Outcome {
        let relay: LoopbackRelay
        let loop: EventLoop
        do {
            relay = try await LoopbackRelay.start(options: options)
            loop = try EventLoop(name: "matrix-qmux-client")
        } catch {
            return .fail("cannot start: \(error)")
        }
        defer { loop.shutdown() }
        let client = OurClient.make(loop: loop, options, fallback: .tcpOnly, handshakeTimeout: .seconds(10))
        let clock = ContinuousClock()
        let start = clock.now
        let outcome: Outcome
        do {
            let connection = try await client.connect(to: relay.address)
            let handshake = (clock.now - start).matrixMilliseconds
            switch testCase {
            case .qmuxStream: outcome = try await streamEcho(connection)
            case .qmuxDatagram: outcome = try await datagramEcho(connection)
            default:
                let paths = await relay.paths(count: 1, within: .seconds(5))
                outcome = MatrixCell.judged(
                    connection.path == .tcp && paths == [.tcp],
                    "QMux over TLS 1.3 on TCP (ALPN \(QMuxALPN.ours)) in \(Int(handshake)) ms; the relay saw "
                        + "\(paths.map(\.rawValue)) handshakes")
            }
            await connection.close()
        } catch {
            outcome = .fail("our client: \(error)")
        }
        await relay.stop()
        return outcome
    }

    /// 40,000 bytes (more than two records' worth) on a stream we open, then FIN; the echo must be identical.
    private static func streamEcho(_ connection: TransportConnection) async throws -> Outcome {
        let sent = (0..<40_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 8) }
        let stream = try await connection.openStream()
        try await stream.write(sent, finish: true)
        var echoed: [UInt8] = []
        while let chunk = try await stream.nextChunk() { echoed += chunk.bytes }
        return MatrixCell.judged(
            echoed == sent,
            "stream \(stream.id): \(sent.count) bytes sent, \(echoed.count) echoed with FIN"
                + (echoed == sent ? ", identical" : ", different"))
    }

    /// Five 80-byte datagrams; over TCP none may be lost, so all five must come back.
    private static func datagramEcho(_ connection: TransportConnection) async throws -> Outcome {
        let count = 5
        for index in 0..<count {
            try connection.sendDatagram([UInt8](repeating: UInt8(index), count: 80), expiresAfter: .seconds(5))
        }
        let echoed = await withTaskGroup(of: Int.self) { group in
            group.addTask {
                var seen = Set<UInt8>()
                for await datagram in connection.datagrams {
                    if let first = datagram.payload.first, datagram.payload.count == 80 { seen.insert(first) }
                    if seen.count == count { break }
                }
                return seen.count
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(5))
                return -1
            }
            var best = 0
            for await result in group {
                if result >= 0 {
                    best = result
                    break
                }
            }
            group.cancelAll()
            return best
        }
        return MatrixCell.judged(echoed == count, "\(echoed) of \(count) DATAGRAM frames of 80 bytes echoed")
    }

    // MARK: - moq-dev's client against our relay

    /// The datagram our relay sends moq-dev's client in the datagram case.
    private static let greeting = [UInt8](repeating: 0x5a, count: 80)

    private static func theirClient(
        _ testCase: MatrixCase, _ options: MatrixOptions, _ peers: MoqPeers
    ) async
        -> Outcome
    {
        let relay: LoopbackRelay
        do {
            // The handshake case's relay only reads, so the connection lives until the script's timeout and
            // carries their QX_PINGs (one a second) and our answers.
            relay = try await LoopbackRelay.start(
                options: options, greeting: testCase == .qmuxDatagram ? greeting : nil,
                echo: testCase != .qmuxHandshake)
        } catch {
            return .fail("cannot start our relay: \(error)")
        }
        let outcome: Outcome
        do {
            let port = Int(relay.address.port)
            // Plaintext QMux straight to our TLS port first: the relay must refuse it and keep serving.
            let direct =
                testCase == .qmuxHandshake
                ? try await peers.runClient(relayPort: port, options: options, direct: true) : nil
            let run = try await peers.runClient(
                relayPort: port, options: options, direct: false, timeout: testCase == .qmuxHandshake ? 3 : 10)
            let ourEnd = await relay.firstClose(within: .seconds(10)) ?? "still open 10 s after their client ended"
            outcome = MoqJudgement(run: run, relayPaths: relay.paths, relayEnd: ourEnd).judge(testCase, direct: direct)
        } catch {
            outcome = .fail("\(error)")
        }
        await relay.stop()
        return outcome
    }

    // MARK: - Our client against moq-dev's server

    private static func theirServer(_ moq: Result<MoqPeers, MatrixError>?) async -> Outcome {
        guard case .success(let peers) = moq else {
            if case .failure(let error) = moq { return .unsupported("\(error)") }
            return .unsupported("moq-ffi was not looked for")
        }
        do {
            let probe = try await peers.probeServer()
            guard !probe.qmuxListener else {
                return .fail(
                    "moq-ffi \(probe.moqFFI ?? "?")'s MoqServer opened a TCP listener (\(probe.sockets)); these cases "
                        + "do not drive it yet")
            }
            return .unsupported(
                "moq-ffi \(probe.moqFFI ?? "?")'s MoqServer accepts QUIC only: set_bind(\"tcp://127.0.0.1:0\") → "
                    + "\(probe.tcpBindError ?? "accepted")"
                    + "; bound to 127.0.0.1:0 (\(probe.bound ?? "-")) it opens \(probe.sockets.joined(separator: ", ")) "
                    + "sockets, no TCP listener. Its QMux listeners (moq's --listen-tcp-bind, the qmux crate's tcp and "
                    + "tls accept) are not in the binding; reaching them takes the Rust crates")
        } catch {
            return .fail("\(error)")
        }
    }
}

/// The ALPN our QMux speaks (draft-ietf-quic-qmux-01 §8.1: the application's ALPN naming the QMux draft).
enum QMuxALPN {
    static let ours = QMuxOverTLS.alpn(forQUIC: ClientConfiguration(serverName: "localhost").alpn)
}
