/// The clients a relay's QUIC connections talk to — each peer's proven address, the bytes it sent from there, and
/// the connection IDs the relay issued it — kept on disk so that a relay restarted after a crash can tell each of
/// them at once that its connection is gone (a stateless reset per ID, RFC 9000 §10.3), instead of leaving a phone
/// that only listens deaf until its next keep-alive.
///
/// Only addresses the peer proved are written (the handshake's, or a new path once its validation succeeded): an
/// address one spoofed packet moved a connection to never is, so a restart cannot be made to reset toward a victim.
/// The bytes received bound what the restart sends there (`RestartResets`: at most three times as much).
///
/// Text, one peer a line: the peer's address, the relay's own address on that path (`HOST:PORT`, IPv6 in
/// brackets; a reset must come from the address the client talks to), the bytes received from the peer's address,
/// and the IDs in hex, separated by spaces, after a `ptt-peers 2` header line. Sans-IO: the relay writes and reads
/// the file.
package struct PeerSnapshot: Equatable, Sendable {
    package struct Peer: Equatable, Sendable {
        package var remote: SocketAddress
        package var local: SocketAddress
        /// UDP payload bytes the relay received from `remote` on this connection.
        package var received: UInt64
        package var ids: [ConnectionID]

        package init(remote: SocketAddress, local: SocketAddress, received: UInt64, ids: [ConnectionID]) {
            self.remote = remote
            self.local = local
            self.received = received
            self.ids = ids
        }
    }

    package var peers: [Peer]

    package init(peers: [Peer]) { self.peers = peers }

    private static let header = "ptt-peers 2"

    /// The file's text.
    package func encoded() -> String {
        var text = Self.header + "\n"
        for peer in peers where !peer.ids.isEmpty {
            text += peer.remote.description + " " + peer.local.description + " " + String(peer.received)
            for id in peer.ids { text += " " + Hex.string(id.bytes) }
            text += "\n"
        }
        return text
    }

    /// Reads a snapshot written by `encoded()`.
    ///
    /// - Throws: `invalidConfiguration` naming the first line that is not a snapshot line, or saying that the file
    ///   is of the first format (`ptt-peers 1`, whose addresses may never have been validated). The caller starts
    ///   without the snapshot: it only speeds up the clients' reconnect.
    package init(decoding text: String) throws(TransportError) {
        var lines = text.split(separator: "\n", omittingEmptySubsequences: true)[...]
        let first = lines.popFirst()
        guard first == Substring(Self.header) else {
            throw TransportError(
                .invalidConfiguration,
                first == "ptt-peers 1"
                    ? "a peer snapshot of an older relay ('ptt-peers 1'), whose addresses may never have been "
                        + "validated: not used"
                    : "not a peer snapshot (no '\(Self.header)' header)")
        }
        var peers: [Peer] = []
        for (index, line) in lines.enumerated() {
            let fields = line.split(separator: " ")
            guard fields.count >= 3, let remote = SocketAddress(parsing: String(fields[0])),
                let local = SocketAddress(parsing: String(fields[1]))
            else {
                throw TransportError(
                    .invalidConfiguration,
                    "peer snapshot line \(index + 2): not two HOST:PORT addresses and a byte count first")
            }
            guard let received = UInt64(fields[2]) else {
                throw TransportError(
                    .invalidConfiguration,
                    "peer snapshot line \(index + 2): '\(fields[2].prefix(24))' is not a byte count")
            }
            var ids: [ConnectionID] = []
            for field in fields.dropFirst(3) {
                guard let bytes = Hex.bytes(field), (1...20).contains(bytes.count) else {
                    throw TransportError(
                        .invalidConfiguration,
                        "peer snapshot line \(index + 2): '\(field.prefix(48))' is not a connection ID in hex")
                }
                ids.append(ConnectionID(bytes))
            }
            peers.append(Peer(remote: remote, local: local, received: received, ids: ids))
        }
        self.peers = peers
    }
}
