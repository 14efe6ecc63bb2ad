/// Where, and how often, a closing connection sends its CONNECTION_CLOSE, so that it never reflects traffic toward
/// an address that did not ask for it.
///
/// RFC 9000 §10.2.1 repeats the close for packets that arrive in the closing period; §8 forbids sending more than
/// three times what arrived to an address that has not been validated, before the handshake and after it alike.
/// A connection moved to a victim's address by one spoofed packet (its current path is then unvalidated) must not
/// send its repeats there while the attacker pokes it from its own address. So every answer goes back to the
/// address the poke came from: at once when that address is validated, and otherwise only when three times the
/// bytes received from that very address, during the closing period, cover it.
///
/// The bytes ngtcp2 sent to an unvalidated address before the close stay within its own per-path 3× limit; the
/// first close goes to the current path only when it is validated (else to the newest validated address), and the
/// repeats spend only what the address earned after it: together, never more than 3× what the address sent.
struct ClosingAnswers {
    /// How many validated addresses are remembered (newest last): a peer moves a handful of times per call.
    static let validatedLimit = 4
    /// How many unvalidated senders keep their credit: forgetting some only means fewer answers, never more.
    static let creditLimit = 64

    /// Addresses the peer proved: the handshake's (server, once it completed) and each path whose validation
    /// succeeded. Newest last.
    private(set) var validated: [SocketAddress] = []
    /// Unvalidated senders in the closing period: the bytes they may still be sent.
    private var credit: [SocketAddress: Int] = [:]

    /// The peer proved `address` (handshake completed there, or a path validation succeeded).
    mutating func validate(_ address: SocketAddress) {
        guard address.length > 0 else { return }
        validated.removeAll { $0 == address }
        validated.append(address)
        if validated.count > Self.validatedLimit { validated.removeFirst() }
    }

    /// Whether the peer proved `address`.
    func isValidated(_ address: SocketAddress) -> Bool { validated.contains(address) }

    /// Where the first close goes when it was written for a path to `path`: there when the address is validated
    /// (or nothing is yet: before the handshake ngtcp2's own limit governs that one packet), else to the newest
    /// validated address, where the peer last proved it was.
    func firstDestination(path: SocketAddress) -> SocketAddress {
        guard let newest = validated.last, !isValidated(path) else { return path }
        return newest
    }

    /// A packet of `length` bytes from `sender` reached the closing connection, whose close is `cost` bytes:
    /// whether to send the close back to `sender` now. `cap` bounds what an unvalidated sender can bank.
    mutating func answer(from sender: SocketAddress, length: Int, cost: Int, cap: Int) -> Bool {
        if isValidated(sender) { return true }
        if credit[sender] == nil, credit.count >= Self.creditLimit { credit.removeAll() }
        var earned = min(credit[sender, default: 0] + 3 * length, cap)
        let answers = earned >= cost
        if answers { earned -= cost }
        credit[sender] = earned
        return answers
    }
}
