import PTTTransport
import TransportCore
import TransportIO

/// One proven trunk to another relay of the fleet: its connection, the control stream both sides write on, and the
/// groups the peer follows (it gets their audio and floor notices).
final class TrunkPeer: Sendable {
    /// The peer relay's fleet name.
    let name: String
    let connection: TransportConnection
    /// Whether this relay dialed it (the other side accepted).
    let dialed: Bool
    /// When it came up (MonotonicClock).
    let upAt: UInt64
    /// The trunk revision the peer speaks (`TrunkMessage.revision`; 1 for a relay of the first, which said none).
    let revision: UInt64
    /// The groups the peer follows.
    let following = Locked<Set<String>>([])
    private let queue: AsyncStream<[UInt8]>.Continuation

    init(name: String, connection: TransportConnection, stream: TransportStream, dialed: Bool, revision: UInt64) {
        self.name = name
        self.revision = revision
        self.connection = connection
        self.dialed = dialed
        upAt = MonotonicClock.now()
        let (messages, queue) = AsyncStream.makeStream(of: [UInt8].self, bufferingPolicy: .bufferingNewest(4096))
        self.queue = queue
        Task {
            for await message in messages {
                do { try await stream.send(message) } catch { break }
            }
        }
    }

    deinit { queue.finish() }

    /// Queues `message`, as a peer of its revision reads it, on the control stream; never waits.
    func send(_ message: TrunkMessage) { queue.yield(message.forPeer(of: revision).encoded()) }

    /// Whether the peer follows `group`.
    func follows(_ group: String) -> Bool { following.withLock { $0.contains(group) } }

    /// Closes the trunk (the peer sees the connection close; both sides forget it).
    func close(reason: String) {
        queue.finish()
        let connection = connection
        Task { await connection.close(code: trunkClosedCode, reason: reason) }
    }
}

/// The application close code of a trunk closed by a relay: refused (no proof, a wrong one, garbage), replaced by
/// a newer trunk to the same relay, or dropped because the peer left the fleet.
public let trunkClosedCode: UInt64 = 0x5054_0010

/// A trunk datagram: the group (its length as a varint, then its UTF-8 name), then the audio frame as the talker
/// sent it (its `AudioFrameHeader` intact: burst and sequence).
enum TrunkDatagram {
    /// The datagram carrying `frame` of `group`.
    static func encode(group: [UInt8], frame: [UInt8]) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(group.count + 1 + frame.count)
        VarInt.encode(UInt64(group.count), into: &bytes)
        bytes += group
        bytes += frame
        return bytes
    }

    /// The group and frame of a trunk datagram; nil for one that is not (empty frame, a name too long or not UTF-8).
    static func decode(_ bytes: [UInt8]) -> (group: String, frame: [UInt8])? {
        guard let (length, prefix) = VarInt.decode(bytes, at: 0), length >= 1, length <= 64,
            bytes.count > prefix + Int(length)
        else { return nil }
        let end = prefix + Int(length)
        guard let group = String(validating: bytes[prefix..<end], as: UTF8.self) else { return nil }
        return (group, Array(bytes[end...]))
    }
}
