import ChildProcesses
import Foundation
import TestSupport
import Testing

@testable import TransportCore

#if canImport(Glibc)
    import Glibc
#endif

/// The independent Python QMux peer (Tests/Peers/qmux_peer.py) in `pipe-server` mode: its server session on
/// stdin/stdout, QMux plaintext without TLS. The Swift side is the sans-IO `QMuxConnection` alone.
private final class QMuxPythonPipePeer {
    static var script: String? {
        let script = "\(Fixtures.root)/Tests/Peers/qmux_peer.py"
        return FileManager.default.fileExists(atPath: script) ? script : nil
    }

    static var python: String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/usr/local/bin"
        return path.split(separator: ":").map { "\($0)/python3" }.first {
            FileManager.default.isExecutableFile(atPath: $0)
        }
    }

    static var isAvailable: Bool { script != nil && python != nil }

    let process: SpawnedProgram

    init(_ arguments: [String] = []) throws {
        signal(SIGPIPE, SIG_IGN)  // the peer may exit while we still write
        process = try SpawnedProgram(Self.python!, [Self.script!, "pipe-server"] + arguments, input: true)
    }

    func write(_ bytes: [UInt8]) {
        var offset = 0
        let fd = process.input
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if written <= 0 { return }
            offset += written
        }
    }

    /// Bytes the peer wrote within `milliseconds` ([] when none), nil at end of file.
    func read(milliseconds: Int32 = 20) -> [UInt8]? {
        var descriptor = pollfd(fd: process.output, events: Int16(POLLIN), revents: 0)
        guard poll(&descriptor, 1, milliseconds) > 0 else { return [] }
        var buffer = [UInt8](repeating: 0, count: 65536)
        let count = buffer.withUnsafeMutableBytes { Glibc.read(descriptor.fd, $0.baseAddress, $0.count) }
        return count > 0 ? Array(buffer[0..<count]) : nil
    }

    /// Closes the peer's stdin, waits for it to exit, and returns its log (stderr).
    func finish() -> String {
        process.closeInput()
        process.wait(within: 30)
        let data = process.readToEnd(process.errors)
        return String(decoding: data, as: UTF8.self)
    }
}

@Suite(
    "QMux interop with the independent Python peer (sans-IO, pipes)",
    .enabled(if: QMuxPythonPipePeer.isAvailable, "python3 and Tests/Peers/qmux_peer.py are needed"), .integration)
struct QMuxPythonPeerTests {
    /// Runs the exchange until `done` holds or 400 rounds pass; the clock is virtual (1 ms a round).
    private func exchange(
        _ client: QMuxConnection, _ peer: QMuxPythonPipePeer, now: inout UInt64,
        onEvent: (QMuxEvent) -> Void, until done: () -> Bool
    ) throws -> Bool {
        for _ in 0..<400 {
            peer.write(client.takeOutput(now: now))
            guard let bytes = peer.read() else { return done() }
            if !bytes.isEmpty { try client.receive(bytes, now: now) }
            while let event = client.nextEvent() { onEvent(event) }
            now += 1_000_000
            if done() { return true }
        }
        return false
    }

    @Test func echoStreamsDatagramsPingAndClose() throws {
        let peer = try QMuxPythonPipePeer()
        // A small receive window: the Python echo must wait for our MAX_STREAM_DATA / MAX_DATA.
        let parameters = QMuxTransportParameters(
            maxIdleTimeout: 30_000, initialMaxData: 16_384,
            initialMaxStreamDataBidiLocal: 4096, initialMaxStreamDataBidiRemote: 4096,
            initialMaxStreamsBidi: 10, maxDatagramFrameSize: 1200)
        let client = QMuxConnection(role: .client, localParameters: parameters, now: 0)
        var now: UInt64 = 0
        var received: [Int64: QMuxReceivedStream] = [:]
        var datagrams: [[UInt8]] = []
        var pongs: [UInt64] = []
        func onEvent(_ event: QMuxEvent) {
            switch event {
            case .streamData(let id, let data, let fin):
                received[id, default: QMuxReceivedStream()].bytes += data
                if fin { received[id]?.fin = true }
                client.consumed(stream: id, bytes: data.count)
            case .datagram(let data): datagrams.append(data)
            case .pong(let sequence): pongs.append(sequence)
            default: break
            }
        }
        #expect(try exchange(client, peer, now: &now, onEvent: onEvent) { client.peerParameters != nil })
        #expect(client.peerParameters?.initialMaxStreamsBidi == 1000)

        var sent: [Int64: [UInt8]] = [:]
        for index in 0..<6 {
            let stream = try client.openBidirectionalStream()
            let payload = (0..<(index == 0 ? 30_000 : 1500)).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ index) }
            sent[stream] = payload
            try client.write(stream: stream, payload, fin: true)
        }
        for index in 0..<5 { try client.sendDatagram(Array("datagram \(index)".utf8)) }
        let sequence = try client.ping()
        let complete = try exchange(client, peer, now: &now, onEvent: onEvent) {
            sent.allSatisfy { received[$0.key] == QMuxReceivedStream(bytes: $0.value, fin: true) }
                && datagrams.count == 5 && !pongs.isEmpty
        }
        #expect(complete)
        #expect(datagrams == (0..<5).map { Array("datagram \($0)".utf8) })
        #expect(pongs == [sequence])

        client.close(applicationError: 0x33, reason: "interop done")
        peer.write(client.takeOutput())
        let log = peer.finish()
        #expect(log.contains("closed: peer application close: code 0x33, reason 'interop done'"), "\(log)")
    }

    @Test(arguments: [
        ("wrong-first-frame", QMuxTransportErrorCode.transportParameterError),
        ("prohibited-frame", .frameEncodingError),
        ("truncated-record", .frameEncodingError),
        ("garbage", .frameEncodingError),
    ])
    func misbehavingPeer(mode: String, expected: QMuxTransportErrorCode) throws {
        let peer = try QMuxPythonPipePeer(["--bad", mode])
        let client = QMuxConnection(role: .client, localParameters: qmuxTestParameters(), now: 0)
        peer.write(client.takeOutput())
        var failure: QMuxError?
        for _ in 0..<200 where failure == nil {
            guard let bytes = peer.read() else { break }
            do throws(QMuxError) {
                try client.receive(bytes, now: 0)
            } catch {
                failure = error
            }
        }
        #expect(failure?.transportCode == expected, "\(String(describing: failure))")
        // Our CONNECTION_CLOSE reaches the peer with that code.
        peer.write(client.takeOutput())
        let log = peer.finish()
        #expect(log.contains("peer transport close: \(qmuxErrorName(expected))"), "\(log)")
    }
}

private func qmuxErrorName(_ code: QMuxTransportErrorCode) -> String {
    String(code.description.prefix { $0 != " " })
}
