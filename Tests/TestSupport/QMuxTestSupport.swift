@testable import TransportCore

package let qmuxMillisecond: UInt64 = 1_000_000

/// Transport parameters generous enough for most tests.
package func qmuxTestParameters(
    window: UInt64 = 1 << 20, streams: UInt64 = 100, datagrams: UInt64 = 1200,
    idleMilliseconds: UInt64 = 0
) -> QMuxTransportParameters {
    QMuxTransportParameters(
        maxIdleTimeout: idleMilliseconds, initialMaxData: window * 4,
        initialMaxStreamDataBidiLocal: window, initialMaxStreamDataBidiRemote: window,
        initialMaxStreamDataUni: window, initialMaxStreamsBidi: streams,
        initialMaxStreamsUni: streams, maxDatagramFrameSize: datagrams)
}

/// One record holding `frames`.
package func qmuxRecord(_ frames: [QMuxFrame]) -> [UInt8] {
    var body: [UInt8] = []
    for frame in frames { frame.encode(into: &body) }
    var out: [UInt8] = []
    QMuxRecord.encode(frames: body, into: &out)
    return out
}

/// Splits a byte stream into records and parses their frames (test-side observer of a connection's output).
package func qmuxParseRecords(_ bytes: [UInt8]) throws(QMuxError) -> [QMuxFrame] {
    var reader = QMuxRecordReader(maxRecordSize: 1 << 30)
    reader.append(bytes)
    var frames: [QMuxFrame] = []
    while let record = try reader.next() { frames += try QMuxFrame.parseAll(record) }
    return frames
}

/// Received stream bytes per stream, with the FIN flag.
package struct QMuxReceivedStream: Equatable {
    package var bytes: [UInt8] = []
    package var fin = false

    package init(bytes: [UInt8] = [], fin: Bool = false) {
        self.bytes = bytes
        self.fin = fin
    }
}

/// Two connections wired back to back in memory, on a virtual clock. Events are collected per side; stream data
/// is consumed at once (unless `autoConsume` is off); the server can echo streams and datagrams.
package final class QMuxTestPair {
    package let client: QMuxConnection
    package let server: QMuxConnection
    package var now: UInt64
    package var echo = true
    package var autoConsume = true
    /// When false, bytes are produced but dropped (a dead link) in that direction.
    package var deliverToServer = true
    package var deliverToClient = true
    package var clientEvents: [QMuxEvent] = []
    package var serverEvents: [QMuxEvent] = []
    package var clientStreams: [Int64: QMuxReceivedStream] = [:]
    package var serverStreams: [Int64: QMuxReceivedStream] = [:]
    package var clientDatagrams: [[UInt8]] = []
    package var serverDatagrams: [[UInt8]] = []
    /// Every frame each side sent, decoded.
    package var clientSent: [QMuxFrame] = []
    package var serverSent: [QMuxFrame] = []
    package var errors: [QMuxError] = []

    package init(
        client: QMuxTransportParameters = qmuxTestParameters(), server: QMuxTransportParameters = qmuxTestParameters(),
        keepAlive: UInt64? = nil, now: UInt64 = 1_000_000_000
    ) {
        self.now = now
        self.client = QMuxConnection(role: .client, localParameters: client, now: now, keepAliveInterval: keepAlive)
        self.server = QMuxConnection(role: .server, localParameters: server, now: now, keepAliveInterval: keepAlive)
    }

    /// Exchanges output until both sides are quiet (or `rounds` runs out).
    @discardableResult
    package func pump(rounds: Int = 10_000) -> Bool {
        for _ in 0..<rounds {
            let toServer = client.takeOutput(now: now)
            let toClient = server.takeOutput(now: now)
            if toServer.isEmpty && toClient.isEmpty {
                drainEvents()
                if client.hasPendingOutput || server.hasPendingOutput { continue }
                return true
            }
            if let frames = try? qmuxParseRecords(toServer) { clientSent += frames }
            if let frames = try? qmuxParseRecords(toClient) { serverSent += frames }
            do throws(QMuxError) {
                if deliverToServer && !toServer.isEmpty { try server.receive(toServer, now: now) }
            } catch { errors.append(error) }
            do throws(QMuxError) {
                if deliverToClient && !toClient.isEmpty { try client.receive(toClient, now: now) }
            } catch { errors.append(error) }
            drainEvents()
        }
        return false
    }

    package func drainEvents() {
        while let event = server.nextEvent() {
            serverEvents.append(event)
            switch event {
            case .streamData(let id, let data, let fin):
                serverStreams[id, default: QMuxReceivedStream()].bytes += data
                if fin { serverStreams[id, default: QMuxReceivedStream()].fin = true }
                if autoConsume { server.consumed(stream: id, bytes: data.count) }
                if echo { try? server.write(stream: id, data, fin: fin) }
            case .datagram(let data):
                serverDatagrams.append(data)
                if echo { try? server.sendDatagram(data) }
            default: break
            }
        }
        while let event = client.nextEvent() {
            clientEvents.append(event)
            switch event {
            case .streamData(let id, let data, let fin):
                clientStreams[id, default: QMuxReceivedStream()].bytes += data
                if fin { clientStreams[id, default: QMuxReceivedStream()].fin = true }
                if autoConsume { client.consumed(stream: id, bytes: data.count) }
            case .datagram(let data):
                clientDatagrams.append(data)
            default: break
            }
        }
    }

    /// Advances the virtual clock to each connection's next deadline (pumping between) until `end`.
    package func run(until end: UInt64) {
        pump()
        while true {
            let deadlines = [client.nextTimeout, server.nextTimeout].compactMap { $0 }
            guard let next = deadlines.min(), next <= end else { break }
            now = max(now, next)
            client.handleTimeout(now: now)
            server.handleTimeout(now: now)
            pump()
        }
        now = max(now, end)
    }
}
