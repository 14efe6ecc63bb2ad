import Foundation
import Glibc
import PTTTransport
import TestSupport
import Testing
import TransportCore

@Suite("Bad input gets a clear error and the server stays up", .integration)
struct BadInputTests {
    private func connectError(_ client: TransportClient, _ address: ServerAddress) async -> TransportError? {
        do {
            let connection = try await client.connect(to: address)
            await connection.close()
            return nil
        } catch let error as TransportError {
            return error
        } catch {
            return nil
        }
    }

    @Test func untrustedCertificateIsRejected() async throws {
        let (server, address, relay) = try await Fixtures.echoServer(
            cert: Fixtures.untrustedCert,
            key: Fixtures.untrustedKey)
        defer { relay.cancel() }
        let error = await connectError(Fixtures.client(), address)
        #expect(error?.code == .certificateUntrusted)
        await server.shutdown()
    }

    @Test func clientTrustingAnotherCAIsRejected() async throws {
        let (server, address, relay) = try await Fixtures.echoServer()
        defer { relay.cancel() }
        let error = await connectError(Fixtures.client(ca: Fixtures.otherCA), address)
        #expect(error?.code == .certificateUntrusted)
        await server.shutdown()
    }

    @Test func wrongServerNameIsRejected() async throws {
        let (server, address, relay) = try await Fixtures.echoServer()
        defer { relay.cancel() }
        let error = await connectError(Fixtures.client(serverName: "relay.other.example"), address)
        #expect(error?.code == .certificateNameMismatch)
        #expect(error?.message.contains("relay.other.example") == true)
        await server.shutdown()
    }

    @Test func expiredCertificateIsRejected() async throws {
        let (server, address, relay) = try await Fixtures.echoServer(
            cert: Fixtures.expiredCert,
            key: Fixtures.expiredKey)
        defer { relay.cancel() }
        let error = await connectError(Fixtures.client(), address)
        #expect(error?.code == .certificateExpired)
        await server.shutdown()
    }

    @Test func wrongALPNIsRejectedAndTheServerServesTheNextClient() async throws {
        let (server, address, relay) = try await Fixtures.echoServer()
        defer { relay.cancel() }
        let error = await connectError(Fixtures.client(alpn: "other/9"), address)
        #expect(error?.code == .alpnMismatch)
        #expect(await connectError(Fixtures.client(), address) == nil)
        await server.shutdown()
    }

    @Test func emptyAndOversizedDatagramsAreRejectedBeforeNgtcp2() async throws {
        let (server, address, relay) = try await Fixtures.echoServer()
        defer { relay.cancel() }
        let connection = try await Fixtures.client().connect(to: address)
        #expect(throws: TransportError.self) { try connection.sendDatagram([]) }
        do {
            try connection.sendDatagram([])
        } catch let error as TransportError {
            #expect(error.code == .datagramEmpty)
        }
        let maximum = connection.maxDatagramPayloadSize
        #expect(maximum > 1000)
        do {
            try connection.sendDatagram([UInt8](repeating: 1, count: maximum + 1))
            Issue.record("an oversized datagram was accepted")
        } catch let error as TransportError {
            #expect(error.code == .datagramTooLarge)
            #expect(error.message.contains("\(maximum)"))
        }
        try connection.sendDatagram([UInt8](repeating: 1, count: maximum))  // the maximum itself is fine
        await connection.close()
        await server.shutdown()
    }

    @Test func oversizedMessagesAreRefusedOnBothSides() async throws {
        let (server, address, relay) = try await Fixtures.echoServer()
        defer { relay.cancel() }
        let connection = try await Fixtures.client().connect(to: address)
        let stream = try await connection.openStream()
        await #expect(throws: TransportError.self) {
            try await stream.send([UInt8](repeating: 0, count: 64 * 1024 + 1))
        }
        await #expect(throws: TransportError.self) { try await stream.send([]) }
        // A peer announcing a 1 MiB message: the reader stops with messageTooLarge instead of buffering it.
        try await stream.write([0x80, 0x10, 0x00, 0x00] + [UInt8](repeating: 0, count: 100))
        do {
            for try await _ in stream.messages {}
            Issue.record("an oversized incoming message was accepted")
        } catch let error as TransportError {
            #expect(error.code == .messageTooLarge)
        }
        await connection.close()
        await server.shutdown()
    }

    @Test func garbageAndTruncatedPacketsDoNotHurtTheServer() async throws {
        let (server, address, relay) = try await Fixtures.echoServer()
        defer { relay.cancel() }
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        defer { close(fd) }
        var target = sockaddr_in()
        target.sin_family = sa_family_t(AF_INET)
        target.sin_port = address.port.bigEndian
        inet_pton(AF_INET, "127.0.0.1", &target.sin_addr)
        var generator = SplitMix64(seed: 0x5eed)
        for index in 0..<2000 {
            let length: Int = [0, 1, 7, 21, 43, 1199, 1200, 1350][index % 8]
            var packet = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            if index % 3 == 0, !packet.isEmpty { packet[0] = 0xc0 | (packet[0] & 0x0f) }  // long header
            if index % 5 == 0, packet.count > 5 { packet[1...4] = [0, 0, 0, 1] }  // QUIC v1 Initial-ish
            _ = withUnsafePointer(to: &target) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, packet, packet.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
        // The server is still up and serves the next client.
        let connection = try await Fixtures.client().connect(to: address)
        let stream = try await connection.openStream()
        try await stream.send(Array("still here".utf8))
        var iterator = stream.messages.makeAsyncIterator()
        #expect(try await iterator.next()?.bytes == Array("still here".utf8))
        await connection.close()
        await server.shutdown()
    }

    @Test func unreadableCertificateIsAClearConfigurationError() async throws {
        do {
            _ = try await TransportServer.bind(configuration: Fixtures.serverConfiguration(cert: "/nonexistent.pem"))
            Issue.record("bind succeeded without a certificate")
        } catch let error as TransportError {
            #expect(error.code == .invalidConfiguration)
            #expect(error.message.contains("/nonexistent.pem"))
        }
    }

    @Test func aMissingOrShortPreviousTicketKeyIsAClearConfigurationError() async throws {
        let short = FileManager.default.temporaryDirectory.appendingPathComponent("ptt-short-\(UUID().uuidString)").path
        #expect(FileManager.default.createFile(atPath: short, contents: Data(repeating: 1, count: 10)))
        defer { try? FileManager.default.removeItem(atPath: short) }
        for (path, says) in [("/nonexistent-previous.key", "cannot read"), (short, "exactly 64")] {
            var configuration = Fixtures.serverConfiguration()
            configuration.previousTicketKeyFile = path
            await #expect {
                _ = try await TransportServer.bind(configuration: configuration)
            } throws: {
                ($0 as? TransportError)?.code == .invalidConfiguration
                    && ($0 as? TransportError)?.message.contains(says) == true
            }
            #expect(
                !FileManager.default.fileExists(atPath: "/nonexistent-previous.key"),
                "a previous key is never created")
        }
    }

    @Test func missingCAFileIsAClearConfigurationError() async throws {
        let (server, address, relay) = try await Fixtures.echoServer()
        defer { relay.cancel() }
        let error = await connectError(Fixtures.client(ca: "/nonexistent-ca.pem"), address)
        #expect(error?.code == .invalidConfiguration)
        await server.shutdown()
    }
}
