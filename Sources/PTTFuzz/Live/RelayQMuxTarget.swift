import ChildProcesses
import Glibc
import TransportCore
import TransportIO

/// QMux inside a real TLS 1.3 session: each input is one connection that completes a legitimate handshake
/// (ALPN `ptt/1-qx01`) and then sends the input as its QMux byte stream — a mutated copy of a valid client
/// conversation (parameters, streams, a datagram, a ping, resets, a close) or random bytes. This reaches the
/// relay's QMux connection and server driver behind the encryption, which the raw TCP target cannot. "Accepted":
/// the relay kept the connection open for 20 ms; "rejected": it closed it (CONNECTION_CLOSE or a TLS alert).
enum RelayQMuxTarget {
    static let name = "relay-qmux-tls"

    static func run(count: Int, context: LiveContext, random: inout FuzzRandom) async -> TargetResult {
        let seeds = [ParserSeeds.qmuxConversation.clientToServer]
        guard let tls = try? TLSClientContext(trust: PEMFile.trust(caFile: context.certificates.authority)) else {
            var result = TargetResult(name: name)
            result.findings.append("cannot load \(context.certificates.authority): target skipped")
            return result
        }
        let relay = context.relay.address
        return await context.drive(name, count: count, random: &random) { random in
            random.oneIn(5)
                ? random.bytes(1 + random.below(512)) : Mutator.mutate(seeds[0], corpus: seeds, using: &random)
        } deliver: { input, buffer in
            guard let kept = exchange(input, with: relay, tls: tls, buffer: buffer) else {
                return .undelivered("no TLS handshake with the relay")
            }
            return kept ? .accepted : .rejected
        }
    }

    /// Handshakes, sends `input` as application data, then watches for 20 ms: true when the relay kept the
    /// connection open, false when it closed it, nil when the handshake itself did not complete.
    static func exchange(
        _ input: [UInt8], with relay: SocketAddress, tls: TLSClientContext,
        buffer: UnsafeMutableRawBufferPointer
    ) -> Bool? {
        guard let socket = try? TCPSocket(connectingTo: relay),
            Poll.writable(socket.fd, milliseconds: 1000), socket.connectionError() == nil,
            let session = try? TLSStreamSession(
                client: tls, serverName: "localhost", alpn: "ptt/1-qx01",
                ticket: nil)
        else { return nil }
        defer { socket.close() }
        let handshakeDeadline = CPUTime.wall() + 3
        while !session.isHandshakeComplete {
            guard (try? session.advance()) != nil, flush(session, to: socket), CPUTime.wall() < handshakeDeadline
            else { return nil }
            if session.isHandshakeComplete { break }
            guard !Poll.readable([socket.fd], milliseconds: 1000).isEmpty,
                let count = try? socket.read(into: buffer), count > 0
            else { return nil }
            session.receive(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
        }
        guard (try? session.send(input)) != nil, flush(session, to: socket) else { return false }
        let deadline = CPUTime.wall() + 0.02
        while CPUTime.wall() < deadline {
            let wait = Int32(max(1, (deadline - CPUTime.wall()) * 1000))
            guard !Poll.readable([socket.fd], milliseconds: wait).isEmpty else { break }
            guard let count = try? socket.read(into: buffer), count > 0 else { return false }
            session.receive(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
            guard let events = try? session.advance(), !events.contains(.closeNotify) else { return false }
        }
        return true
    }

    /// Writes the session's pending ciphertext; false when the connection failed.
    private static func flush(_ session: TLSStreamSession, to socket: TCPSocket) -> Bool {
        let ciphertext = session.takeCiphertext()
        guard !ciphertext.isEmpty else { return true }
        return ciphertext.withUnsafeBytes { TCPRecorder.writeAll($0, to: socket) }
    }
}
