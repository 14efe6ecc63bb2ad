import Testing

@testable import TransportCore

/// The relay's peer snapshot file: what it writes reads back, and a file that is not one is a typed error naming
/// the line.
@Suite struct PeerSnapshotTests {
    @Test func aSnapshotReadsBackAsWritten() throws {
        let snapshot = PeerSnapshot(peers: [
            .init(
                remote: SocketAddress(host: "192.0.2.7", port: 50_000)!,
                local: SocketAddress(host: "0.0.0.0", port: 4433)!,
                ids: [ConnectionID([0x00, 0x01, 0xfe, 0xff]), ConnectionID.random(length: 18)]),
            .init(
                remote: SocketAddress(host: "2001:db8::1", port: 6)!, local: SocketAddress(host: "::1", port: 4433)!,
                ids: [ConnectionID.random(length: 20)]),
        ])
        let text = snapshot.encoded()
        #expect(text.hasPrefix("ptt-peers 1\n192.0.2.7:50000 0.0.0.0:4433 0001feff "))
        #expect(try PeerSnapshot(decoding: text) == snapshot)
        #expect(try PeerSnapshot(decoding: PeerSnapshot(peers: []).encoded()).peers.isEmpty)
    }

    @Test(arguments: [
        ("", "header"), ("ptt-peers 2\n", "header"), ("ptt-peers 1\nrelay.example:1 0.0.0.0:1 00\n", "line 2"),
        ("ptt-peers 1\n192.0.2.1:1\n", "line 2"), ("ptt-peers 1\n192.0.2.1:1 0.0.0.0:1 0g\n", "line 2"),
        (
            "ptt-peers 1\n192.0.2.1:1 0.0.0.0:1 00\n192.0.2.1:1 0.0.0.0:1 \(String(repeating: "ab", count: 21))\n",
            "line 3"
        ),
        ("ptt-peers 1\n192.0.2.1:1 0.0.0.0:1 abc\n", "line 2"),
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
}
