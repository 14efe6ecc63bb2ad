import Testing

@testable import TransportCore

/// A server accepting further application protocols beside its own (a relay's trunks on its phones' port): each
/// client gets the protocol it offered, and one offering none of them is refused in the handshake.
@Suite("A server with additional ALPNs")
struct AdditionalALPNTests {
    static func server() -> QUICParameters {
        var parameters = QUICParameters()
        parameters.additionalALPNs = ["ptt-trunk/1"]
        return parameters
    }

    static func client(_ alpn: String) -> QUICParameters {
        var parameters = QUICParameters()
        parameters.alpn = alpn
        return parameters
    }

    @Test(arguments: ["ptt/1", "ptt-trunk/1"])
    func eachClientGetsTheProtocolItOffered(alpn: String) throws {
        let net = try VirtualNetwork(parameters: Self.server())
        try net.addClient(parameters: Self.client(alpn))
        #expect(net.run { net.clientHandshakeCompleted() })
        #expect(net.client.negotiatedALPN == alpn)
        #expect(net.serverConnections.map(\.negotiatedALPN) == [alpn])
    }

    @Test func aClientOfferingAnotherProtocolIsRefused() throws {
        let net = try VirtualNetwork(parameters: Self.server())
        try net.addClient(parameters: Self.client("h3"))
        #expect(net.run { net.clientCloseReason() != nil })
        #expect(!net.clientHandshakeCompleted())
        #expect(net.clientCloseReason()?.error.code == .alpnMismatch, "\(String(describing: net.clientCloseReason()))")
    }

    @Test func additionalProtocolsAreChecked() {
        for bad in [[""], ["ptt/1"], [String(repeating: "x", count: 256)]] {
            var parameters = QUICParameters()
            parameters.additionalALPNs = bad
            #expect(throws: TransportError.self) { try parameters.validate() }
        }
    }

    @Test func certificateNamesAreRead() throws {
        #expect(try CertificateNames.dnsNames(of: TestCertificates.pem(TestCertificates.serverCert)) == ["localhost"])
        for garbage in [[UInt8](), Array("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".utf8)] {
            #expect(throws: TransportError.self) { try CertificateNames.dnsNames(of: PEMData(garbage)) }
        }
    }
}
