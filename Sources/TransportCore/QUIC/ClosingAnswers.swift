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
    /// How many unvalidated senders keep their credit: forgetting some only means fewer answers, never more.
    static let creditLimit = 64

    /// Unvalidated senders in the closing period: the bytes they may still be sent.
    private var credit: [SocketAddress: Int] = [:]

    /// Where the first close goes when it was written for a path to `path`: there when the address is validated
    /// (or nothing is yet: before the handshake ngtcp2's own limit governs that one packet), else to the newest
    /// validated address, where the peer last proved it was.
    func firstDestination(path: SocketAddress, proven: PeerAddresses) -> SocketAddress {
        guard let newest = proven.newestValidated, !proven.isValidated(path) else { return path }
        return newest.address
    }

    /// A packet of `length` bytes from `sender` reached the closing connection, whose close is `cost` bytes:
    /// whether to send the close back to `sender` now. `cap` bounds what an unvalidated sender can bank.
    mutating func answer(from sender: SocketAddress, length: Int, cost: Int, cap: Int, proven: PeerAddresses) -> Bool {
        if proven.isValidated(sender) { return true }
        if credit[sender] == nil, credit.count >= Self.creditLimit { credit.removeAll() }
        var earned = min(credit[sender, default: 0] + 3 * length, cap)
        let answers = earned >= cost
        if answers { earned -= cost }
        credit[sender] = earned
        return answers
    }
}
