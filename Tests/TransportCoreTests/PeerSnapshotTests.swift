import Testing

@testable import TransportCore

/// The relay's peer snapshot file: what it writes reads back, and a file that is not one is a typed error naming
/// the line; what a restart sends for it stays within three times what each address sent.
@Suite struct PeerSnapshotTests {
    @Test func aSnapshotReadsBackAsWritten() throws {
        let snapshot = PeerSnapshot(peers: [
            .init(
                remote: SocketAddress(host: "192.0.2.7", port: 50_000)!,
                local: SocketAddress(host: "0.0.0.0", port: 4433)!, received: 3_600,
                ids: [ConnectionID([0x00, 0x01, 0xfe, 0xff]), ConnectionID.random(length: 18)]),
            .init(
                remote: SocketAddress(host: "2001:db8::1", port: 6)!, local: SocketAddress(host: "::1", port: 4433)!,
                received: 0, ids: [ConnectionID.random(length: 20)]),
        ])
        let text = snapshot.encoded()
        #expect(text.hasPrefix("ptt-peers 2\n192.0.2.7:50000 0.0.0.0:4433 3600 0001feff "))
        #expect(try PeerSnapshot(decoding: text) == snapshot)
        #expect(try PeerSnapshot(decoding: PeerSnapshot(peers: []).encoded()).peers.isEmpty)
    }

    @Test(arguments: [
        ("", "header"), ("ptt-peers 3\n", "header"), ("ptt-peers 2\nrelay.example:1 0.0.0.0:1 9 00\n", "line 2"),
        ("ptt-peers 2\n192.0.2.1:1\n", "line 2"), ("ptt-peers 2\n192.0.2.1:1 0.0.0.0:1 9 0g\n", "line 2"),
        ("ptt-peers 2\n192.0.2.1:1 0.0.0.0:1 zz 00\n", "line 2"),
        ("ptt-peers 2\n192.0.2.1:1 0.0.0.0:1 -1 00\n", "line 2"),
        (
            "ptt-peers 2\n192.0.2.1:1 0.0.0.0:1 9 00\n192.0.2.1:1 0.0.0.0:1 9 \(String(repeating: "ab", count: 21))\n",
            "line 3"
        ),
        ("ptt-peers 2\n192.0.2.1:1 0.0.0.0:1 9 abc\n", "line 2"),
        // The first format recorded addresses no one proved: such a file is not used.
        ("ptt-peers 1\n192.0.2.1:1 0.0.0.0:1 00\n", "older relay"),
    ])
    func aFileThatIsNotASnapshotIsATypedError(text: String, naming: String) {
        #expect {
            try PeerSnapshot(decoding: text)
        } throws: { error in
            (error as? TransportError)?.code == .invalidConfiguration && "\(error)".contains(naming)
        }
    }

    @Test func aResetCarriesTheTokenOfItsConnectionID() throws {
        let secret = SecureRandom.bytes(32)
        let id = ConnectionID.random(length: 18)
        let packet = try #require(StatelessReset.packet(secret: secret, cid: id))
        #expect(packet.count == 43)
        #expect(packet[0] & 0xc0 == 0x40, "it looks like a short-header packet")
        #expect(Array(packet.suffix(16)) == QUICConnection.statelessResetToken(secret: secret, cid: id))
    }

    static func peer(_ host: String, port: UInt16 = 5000, received: UInt64, ids: Int) -> PeerSnapshot.Peer {
        PeerSnapshot.Peer(
            remote: SocketAddress(host: host, port: port)!, local: SocketAddress(host: "0.0.0.0", port: 4433)!,
            received: received, ids: (0..<ids).map { _ in ConnectionID.random(length: 18) })
    }

    /// An honest phone's handshake (at least one 1,200-byte Initial) covers all eight of its IDs' resets.
    @Test func aRestartResetsEveryIDOfAPhoneThatHandshook() {
        let plan = RestartResets(
            for: PeerSnapshot(peers: [Self.peer("192.0.2.1", received: 1_200, ids: 8)]), limit: 100)
        #expect(plan.resets.count == 8 && plan.withheld == 0 && plan.addresses == 1)
    }

    /// An address is sent at most three times what it sent, summed over the connections there, whatever the
    /// snapshot lists; and no connection gets more than eight resets.
    @Test func aRestartSendsAnAddressAtMostThreeTimesWhatItSent() {
        let snapshot = PeerSnapshot(peers: [
            Self.peer("192.0.2.1", port: 1, received: 39, ids: 8),
            Self.peer("192.0.2.1", port: 1, received: 100, ids: 8),
            Self.peer("192.0.2.2", received: 0, ids: 8),
            Self.peer("192.0.2.3", received: 1_000_000, ids: 20),
        ])
        let plan = RestartResets(for: snapshot, limit: 1_000)
        for (address, received) in [("192.0.2.1", 139), ("192.0.2.2", 0), ("192.0.2.3", 1_000_000)] {
            let remote = SocketAddress(host: address, port: address == "192.0.2.1" ? 1 : 5000)!
            let bytes = plan.resets.filter { $0.remote == remote }.count * RestartResets.resetLength
            #expect(bytes <= 3 * received, "\(address): \(bytes) bytes for \(received) received")
        }
        #expect(plan.resets.count == 9 + 0 + 8, "417 bytes of credit pay 9 resets; 8 IDs per connection")
        #expect(plan.withheld == 7 + 8 + 12)
        #expect(plan.addresses == 2)
    }

    @Test func aRestartSendsAtMostItsLimit() {
        let peers = (0..<10).map { Self.peer("192.0.2.\($0 + 1)", received: 10_000, ids: 8) }
        let plan = RestartResets(for: PeerSnapshot(peers: peers), limit: 20)
        #expect(plan.resets.count == 20 && plan.withheld == 60)
    }
}
