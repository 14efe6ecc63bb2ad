/// The addresses a server connection's peer sent from, the bytes each sent, and which of them the peer proved
/// (RFC 9000 §8): the handshake's, once the handshake completed there, and each path whose validation succeeded.
///
/// Anything the relay sends an address unasked — the repeats of a CONNECTION_CLOSE (`ClosingAnswers`), a restarted
/// relay's stateless resets (`RestartResets`) — follows from this: an address the peer proved may be answered, and
/// then only within three times what it sent. One spoofed packet makes ngtcp2 move to a victim's address and probe
/// it, but never makes that address proven.
struct PeerAddresses {
    struct Entry: Equatable {
        var address: SocketAddress
        /// UDP payload bytes received from the address on this connection.
        var received: UInt64
        /// The peer proved the address (handshake completed there, or a path validation succeeded).
        var validated: Bool
    }

    /// How many addresses are remembered: a peer moves a handful of times per call. Forgetting one only means
    /// fewer answers to it later, never more: a new address starts unproven, with nothing received.
    static let limit = 8

    /// Newest last: an address is appended when its first packet arrives and moved to the end when it is proven.
    private(set) var entries: [Entry] = []

    /// A packet of `length` bytes arrived from `address` (checked against the newest address first: the peer's
    /// current one, nearly always).
    mutating func received(_ length: Int, from address: SocketAddress) {
        if let last = entries.indices.last, entries[last].address == address {
            entries[last].received &+= UInt64(length)
        } else if let index = entries.firstIndex(where: { $0.address == address }) {
            entries[index].received &+= UInt64(length)
        } else {
            makeRoom()
            entries.append(Entry(address: address, received: UInt64(length), validated: false))
        }
    }

    /// The peer proved `address`.
    mutating func validate(_ address: SocketAddress) {
        guard address.length > 0 else { return }
        var entry = Entry(address: address, received: 0, validated: true)
        if let index = entries.firstIndex(where: { $0.address == address }) {
            entry.received = entries.remove(at: index).received
        } else {
            makeRoom()
        }
        entries.append(entry)
    }

    /// Whether the peer proved `address`.
    func isValidated(_ address: SocketAddress) -> Bool {
        entries.contains { $0.address == address && $0.validated }
    }

    /// The address the peer proved last, if any.
    var newestValidated: Entry? { entries.last { $0.validated } }

    /// Where the peer is, as far as it proved: `current` when it is proven, else the newest proven address (nil:
    /// none yet, the handshake has not completed).
    func proven(current: SocketAddress) -> Entry? {
        entries.last { $0.validated && $0.address == current } ?? newestValidated
    }

    /// Forgets the oldest unproven address (the oldest proven one when all are) once `limit` are remembered.
    private mutating func makeRoom() {
        guard entries.count >= Self.limit else { return }
        entries.remove(at: entries.firstIndex { !$0.validated } ?? 0)
    }
}

extension QUICConnection {
    /// Server: where the peer is as far as it proved it — the current address when validated, else the newest
    /// validated one — and the bytes received from there; nil before the handshake completed. What a restarted
    /// relay may send (see `PeerSnapshot`).
    package var provenRemote: (address: SocketAddress, received: UInt64)? {
        peerAddresses.proven(current: currentRemote).map { ($0.address, $0.received) }
    }
}
