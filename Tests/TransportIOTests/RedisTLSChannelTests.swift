import Foundation
import Testing
import TransportCore
import TransportIO

/// `RedisTLSChannel` fed what is not TLS (a plain Redis' answer, random bytes, a truncated record): a typed error
/// that names the host and says what to check, never a crash; and no plaintext before a verified handshake.
struct RedisTLSChannelTests {
    private static func channel() throws -> RedisTLSChannel {
        var url = URL(fileURLWithPath: #filePath)
        while !FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) {
            url.deleteLastPathComponent()
        }
        let path = url.appendingPathComponent("certs/ca.pem").path
        let pem = PEMData([UInt8](FileManager.default.contents(atPath: path) ?? Data()), origin: path)
        return try RedisTLSChannel(RedisTLS(trust: .certificates(pem), serverName: "redis.example"))
    }

    @Test func theClientHelloIsReadyAndCommandsWaitForTheHandshake() throws {
        let channel = try Self.channel()
        let hello = channel.takeCiphertext()
        #expect(hello.first == 0x16, "a TLS handshake record")
        try channel.send(RESPValue.command(["PING"]))
        #expect(channel.takeCiphertext().isEmpty, "nothing is sent before the server is verified")
        #expect(!channel.isHandshakeComplete)
    }

    @Test func aPlainRedisAnswerSaysThePortIsNotTLS() throws {
        let channel = try Self.channel()
        _ = channel.takeCiphertext()
        let answer = Array("-ERR unknown command '\u{16}\u{03}\u{01}', with args beginning with: \r\n".utf8)
        do {
            _ = try answer.withUnsafeBytes { try channel.receive($0) }
            Issue.record("a plain answer was taken for TLS")
        } catch let error as TransportError {
            #expect(error.message.contains("redis.example") && error.message.contains("not rediss://"), "\(error)")
        }
    }

    @Test(arguments: [1, 2, 3, 4, 5, 6, 7, 8])
    func garbageIsATypedErrorAndNeverPlaintext(seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        let channel = try Self.channel()
        _ = channel.takeCiphertext()
        var plaintext: [UInt8] = []
        var failed = false
        for _ in 0..<16 where !failed {
            let count = Int.random(in: 1...600, using: &random)
            var bytes = (0..<count).map { _ in UInt8.random(in: 0...255, using: &random) }
            if seed.isMultiple(of: 2) { bytes[0] = 0x16 }  // looks like a handshake record: GnuTLS parses further
            do {
                plaintext += try bytes.withUnsafeBytes { try channel.receive($0) }
            } catch let error as TransportError {
                failed = true
                #expect(error.message.hasPrefix("Redis over TLS at redis.example"), "\(error)")
            }
        }
        #expect(plaintext.isEmpty)
        #expect(!channel.isHandshakeComplete)
    }
}
