/// The stateless resets a relay restarted after a crash sends for its previous run's `PeerSnapshot`, bounded so a
/// restart never becomes a reflector:
/// - **per address**, at most three times the bytes the relay received from that address (the sum over the
///   snapshot's connections there), RFC 9000 §8's limit for an address the relay has not heard from since: each
///   reset costs `resetLength` bytes, and the IDs beyond the address's credit are withheld;
/// - **per connection**, at most `idsPerConnection` IDs (what ngtcp2 issues a peer at once);
/// - **per restart**, at most `limit` resets in all; and the caller uses a snapshot once (the relay empties the file
///   before it sends), so crashing again, however often, sends nothing more for the same connections.
///
/// Sans-IO: the caller sends what `resets` lists.
package struct RestartResets: Sendable, Equatable {
    /// One reset to send: from `local` to `remote`, for `id`.
    package struct Reset: Sendable, Equatable {
        package var remote: SocketAddress
        package var local: SocketAddress
        package var id: ConnectionID
    }

    /// The size of each reset (UDP payload): the longest a reset is, so it looks like any short-header packet.
    package static let resetLength = 43
    /// Bytes a restart may send an address per byte it received from there.
    package static let amplification: UInt64 = 3
    /// IDs reset per connection at most.
    package static let idsPerConnection = 8

    /// The resets to send, in the snapshot's order.
    package private(set) var resets: [Reset] = []
    /// Resets left out: over an address's credit, a connection's ID limit or the restart's `limit`.
    package private(set) var withheld = 0
    /// The addresses `resets` go to.
    package private(set) var addresses = 0

    /// The plan for `snapshot`, with at most `limit` resets.
    package init(for snapshot: PeerSnapshot, limit: Int) {
        var received: [SocketAddress: UInt64] = [:]
        for peer in snapshot.peers {
            let (sum, overflow) = received[peer.remote, default: 0].addingReportingOverflow(peer.received)
            received[peer.remote] = overflow ? .max : sum
        }
        var credit = received.mapValues { min($0, UInt64.max / Self.amplification) * Self.amplification }
        var reached = Set<SocketAddress>()
        let cost = UInt64(Self.resetLength)
        for peer in snapshot.peers {
            for (index, id) in peer.ids.enumerated() {
                guard index < Self.idsPerConnection, resets.count < limit, credit[peer.remote, default: 0] >= cost
                else {
                    withheld += 1
                    continue
                }
                credit[peer.remote]! -= cost
                resets.append(Reset(remote: peer.remote, local: peer.local, id: id))
                reached.insert(peer.remote)
            }
        }
        addresses = reached.count
    }
}
