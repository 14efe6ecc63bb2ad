import PTTTalkGroups
import PTTTransport
import TransportCore
import TransportIO

/// A relay server (QUIC and TCP on one port) whose connections a test hands to `RelayChannel`s itself, and
/// clients whose received datagrams are recorded.
final class ChannelTestBed: Sendable {
    let server: TransportServer
    let address: ServerAddress
    /// Accepted connections, in order, not yet handed to a test.
    private let accepted = Locked<[TransportConnection]>([])
    private let acceptor: Task<Void, Never>

    /// `eventLoops`: the server's loop count (nil: the default, one per CPU).
    init(eventLoops: Int? = nil) async throws {
        var configuration = Fixtures.serverConfiguration()
        configuration.tcp = "127.0.0.1:0"
        if let eventLoops { configuration.eventLoops = eventLoops }
        let server = try await TransportServer.bind(configuration: configuration)
        self.server = server
        address = server.quicAddress!
        acceptor = Task { [accepted] in
            for await connection in server.connections { accepted.withLock { $0.append(connection) } }
        }
    }

    deinit { acceptor.cancel() }

    /// Connects a client over `policy`'s path and returns it with the server's side of the connection (call it
    /// from one task at a time, so the next accepted connection is this client's).
    func connect(_ policy: FallbackPolicy) async throws -> ChannelPeer {
        let client = try await TCPFallbackTests.client(policy).connect(to: address)
        let peer = ChannelPeer(client: client, relaySide: try await accept())
        await client.setDatagramHandler { [received = peer.received] datagram in
            received.withLock { $0.append(Frame(bytes: datagram.payload)) }
        }
        return peer
    }

    /// The next accepted connection not yet handed out, waiting up to 2 s for it (a client in a child process
    /// connects this way).
    func accept() async throws -> TransportConnection {
        for _ in 0..<1000 {
            if let next = accepted.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) { return next }
            try await Task.sleep(for: .milliseconds(2))
        }
        throw TransportError(.connectionRefused, "the test server accepted nothing")
    }
}

/// One client of the test relay: its connection, the relay's side of it, and the frames it received.
struct ChannelPeer: Sendable {
    let client: TransportConnection
    let relaySide: TransportConnection
    let received = Locked<[Frame]>([])

    /// Sends `count` frames tagged `tag`, paced a little (loopback drops bursts larger than a socket buffer).
    func send(_ count: Int, tag: UInt8) async throws -> [Frame] {
        let frames = (0..<count).map { Frame(tag: tag, sequence: $0) }
        for frame in frames {
            try client.sendDatagram(frame.bytes)
            try await Task.sleep(for: .milliseconds(2))
        }
        return frames
    }

    /// What arrived so far, and forgets it.
    func take() -> [Frame] {
        received.withLock { frames in
            defer { frames.removeAll() }
            return frames
        }
    }

    var count: Int { received.withLock { $0.count } }
}

/// An audio-sized frame tagged with its sender and sequence number; printed as `tag.sequence` so that a failed
/// expectation stays readable.
struct Frame: Equatable, Sendable, CustomStringConvertible {
    let bytes: [UInt8]

    init(bytes: [UInt8]) { self.bytes = bytes }

    init(tag: UInt8, sequence: Int) {
        bytes = [tag, UInt8(sequence)] + [UInt8](repeating: 0xaa, count: 78)
    }

    var description: String {
        bytes.count == 80 ? "\(bytes[0]).\(bytes[1])" : "\(bytes.count) bytes"
    }
}

/// Waits (polling, up to 20 s: a loaded machine may starve the relay that long) until `condition` holds, then a
/// little longer so that duplicates or strays would have arrived too.
func settle(until condition: @escaping @Sendable () -> Bool) async throws {
    _ = await eventually(within: .seconds(20), condition)
    try await Task.sleep(for: .milliseconds(100))
}
