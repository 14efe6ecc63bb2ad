import ChildProcesses
import Glibc
import TransportCore
import TransportIO

/// Connections to the relay's TCP port, each carrying one input: random bytes (sometimes behind a
/// TLS handshake record header) and mutated copies of captured first flights (full and resumed ClientHellos).
/// An input is "accepted" when the relay answered with a TLS handshake record, "rejected" otherwise (an alert,
/// or a close).
enum RelayTCPTarget {
    static let name = "relay-tcp"

    static func run(
        count: Int, seeds: [[UInt8]], context: LiveContext, random: inout FuzzRandom
    ) async
        -> TargetResult
    {
        let relay = context.relay.address
        return await context.drive(name, count: count, random: &random) {
            next(seeds: seeds, random: &$0)
        } deliver: {
            exchange($0, with: relay, buffer: $1) ? .accepted : .rejected
        }
    }

    /// Sends `input`, reads for at most 100 ms (until the relay closes, or 5 ms after its first bytes), then
    /// closes; true when the reply starts with a handshake record.
    static func exchange(
        _ input: [UInt8], with relay: SocketAddress, buffer: UnsafeMutableRawBufferPointer
    )
        -> Bool
    {
        guard let socket = try? TCPSocket(connectingTo: relay) else { return false }
        defer { socket.close() }
        guard Poll.writable(socket.fd, milliseconds: 1000), socket.connectionError() == nil else { return false }
        let sent = input.withUnsafeBytes { TCPRecorder.writeAll($0, to: socket) }
        guard sent else { return false }
        var first: UInt8?
        var deadline = CPUTime.wall() + 0.1
        while CPUTime.wall() < deadline {
            let wait = Int32(max(1, (deadline - CPUTime.wall()) * 1000))
            guard !Poll.readable([socket.fd], milliseconds: wait).isEmpty else { break }
            guard let count = try? socket.read(into: buffer), count > 0 else { break }
            if first == nil {
                first = buffer[0]
                deadline = min(deadline, CPUTime.wall() + 0.005)
            }
        }
        return first == 0x16
    }

    /// A mutated captured flight (three in four), else random bytes, half of them behind a TLS 1.0-versioned
    /// handshake record header announcing a random length.
    static func next(seeds: [[UInt8]], random: inout FuzzRandom) -> [UInt8] {
        if !seeds.isEmpty && !random.oneIn(4) {
            return Mutator.mutate(seeds[random.below(seeds.count)], corpus: seeds, using: &random)
        }
        var bytes: [UInt8] = []
        if random.oneIn(2) {
            let length = random.below(1 << 15)
            bytes = [0x16, 0x03, 0x01, UInt8(length >> 8), UInt8(length & 0xff), 0x01]
        }
        bytes += random.bytes(1 + random.below(2048))
        return bytes
    }
}
