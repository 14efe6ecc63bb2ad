/// The clients a relay's QUIC connections talk to — each peer's address and the connection IDs the relay issued
/// it — kept on disk so that a relay restarted after a crash can tell each of them at once that its connection is
/// gone (a stateless reset per ID, RFC 9000 §10.3), instead of leaving a phone that only listens deaf until its
/// next keep-alive.
///
/// Text, one peer a line: the peer's address, the relay's own address on that path (`HOST:PORT`, IPv6 in
/// brackets; a reset must come from the address the client talks to) and the IDs in hex, separated by spaces,
/// after a `ptt-peers 1` header line. Sans-IO: the relay writes and reads the file.
package struct PeerSnapshot: Equatable, Sendable {
    package struct Peer: Equatable, Sendable {
        package var remote: SocketAddress
        package var local: SocketAddress
        package var ids: [ConnectionID]

        package init(remote: SocketAddress, local: SocketAddress, ids: [ConnectionID]) {
            self.remote = remote
            self.local = local
            self.ids = ids
        }
    }

    package var peers: [Peer]

    package init(peers: [Peer]) { self.peers = peers }

    private static let header = "ptt-peers 1"

    /// The file's text.
    package func encoded() -> String {
        var text = Self.header + "\n"
        for peer in peers where !peer.ids.isEmpty {
            text += peer.remote.description + " " + peer.local.description
            for id in peer.ids { text += " " + Hex.string(id.bytes) }
            text += "\n"
        }
        return text
    }

    /// Reads a snapshot written by `encoded()`.
    ///
    /// - Throws: `invalidConfiguration` naming the first line that is not a snapshot line (the caller starts
    ///   without the snapshot: it only speeds up the clients' reconnect).
    package init(decoding text: String) throws(TransportError) {
        var lines = text.split(separator: "\n", omittingEmptySubsequences: true)[...]
        guard lines.popFirst() == Substring(Self.header) else {
            throw TransportError(.invalidConfiguration, "not a peer snapshot (no '\(Self.header)' header)")
        }
        var peers: [Peer] = []
        for (index, line) in lines.enumerated() {
            let fields = line.split(separator: " ")
            guard fields.count >= 2, let remote = SocketAddress(parsing: String(fields[0])),
                let local = SocketAddress(parsing: String(fields[1]))
            else {
                throw TransportError(
                    .invalidConfiguration, "peer snapshot line \(index + 2): not two HOST:PORT addresses first")
            }
            var ids: [ConnectionID] = []
            for field in fields.dropFirst(2) {
                guard let bytes = Hex.bytes(field), (1...20).contains(bytes.count) else {
                    throw TransportError(
                        .invalidConfiguration,
                        "peer snapshot line \(index + 2): '\(field.prefix(48))' is not a connection ID in hex")
                }
                ids.append(ConnectionID(bytes))
            }
            peers.append(Peer(remote: remote, local: local, ids: ids))
        }
        self.peers = peers
    }
}
