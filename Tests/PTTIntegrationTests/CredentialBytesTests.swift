import Foundation
import PTTTransport
import TestSupport
import Testing
import TransportCore
import TransportIO

/// The core takes PEM bytes; PTTTransport reads the configured files (same errors as when the core read them), and
/// a client may also trust CA certificates it already holds in memory.
@Suite("Certificates as bytes, files read above the core", .integration)
struct CredentialBytesTests {
    @Test func aClientTrustsCACertificatesGivenAsBytes() async throws {
        let (server, address, relay) = try await Fixtures.echoServer()
        defer { relay.cancel() }
        let ca = try #require(FileManager.default.contents(atPath: Fixtures.ca))
        for fallback in [FallbackPolicy.quicOnly, .tcpOnly] where fallback == .quicOnly || server.tcpAddress != nil {
            let client = TransportClient(
                configuration: ClientConfiguration(
                    serverName: "localhost", trust: .caCertificates([UInt8](ca)), fallback: fallback))
            try await withTimeout {
                let connection = try await client.connect(to: address)
                let stream = try await connection.openStream()
                try await stream.send(Array("bytes".utf8))
                #expect(try await stream.nextMessage()?.bytes == Array("bytes".utf8))
                await connection.close()
            }
        }
        await server.shutdown()
    }

    @Test func caBytesWithoutACertificateAreAConfigurationError() async throws {
        let client = TransportClient(
            configuration: ClientConfiguration(
                serverName: "localhost", trust: .caCertificates(Array("not a PEM".utf8)), fallback: .quicOnly))
        let error = await #expect(throws: TransportError.self) {
            _ = try await client.connect(to: ServerAddress(host: "127.0.0.1", port: 9))
        }
        #expect(error?.code == .invalidConfiguration)
        #expect(error?.message.contains("no CA certificate could be loaded from the CA certificates given") == true)
    }

    @Test func missingFilesAreNamedWithTheirReason() throws {
        let missing = "/nonexistent-\(UUID()).pem"
        #expect {
            _ = try PEMFile.read(missing)
        } throws: { error in
            let error = error as? TransportError
            return error?.code == .invalidConfiguration
                && error?.message == "cannot read \(missing): No such file or directory"
        }
        #expect {
            _ = try PEMFile.trust(caFile: missing)
        } throws: { error in
            let error = error as? TransportError
            return error?.code == .invalidConfiguration
                && error?.message == "no CA certificate could be loaded from \(missing): No such file or directory"
        }
        let read = try PEMFile.read(Fixtures.ca)
        #expect(read.origin == Fixtures.ca)
        #expect(read.bytes == [UInt8](try #require(FileManager.default.contents(atPath: Fixtures.ca))))
        #expect(try PEMFile.trust(caFile: nil) == .system)
    }

    @Test func aCertificateThatDoesNotLoadNamesBothFiles() async throws {
        // The key file given as the certificate: readable, but no certificate chain.
        let configuration = Fixtures.serverConfiguration(cert: Fixtures.serverKey, key: Fixtures.serverKey)
        let error = await #expect(throws: TransportError.self) {
            _ = try await TransportServer.bind(configuration: configuration)
        }
        #expect(error?.code == .invalidConfiguration)
        #expect(
            error?.message.contains("loading the certificate \(Fixtures.serverKey) with key \(Fixtures.serverKey)")
                == true)
    }
}
