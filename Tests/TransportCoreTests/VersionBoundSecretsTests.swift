import Foundation
import Testing

@testable import TransportCore

/// The relay's NEW_TOKEN tokens and session-ticket keys are bound to the QUIC version of the connection that issued
/// them (RFC 9369 §5): v1 keeps the fleet's secrets as they are, v2 derives its own.
@Suite("Tokens and ticket keys bound to their QUIC version")
struct VersionBoundSecretsTests {
    static let v1 = LinkedNgtcp2.quicVersion1
    static let v2 = LinkedNgtcp2.quicVersion2

    @Test func aNewTokenValidatesOnlyAnInitialOfItsVersion() throws {
        let endpoint = try VirtualNetwork().server
        let client = try #require(SocketAddress(host: "192.0.2.1", port: 5000))
        let elsewhere = try #require(SocketAddress(host: "192.0.2.9", port: 5000))
        let now = UInt64(Date().timeIntervalSince1970 * 1e9)
        for issued in [Self.v1, Self.v2] {
            let token = try #require(endpoint.makeRegularToken(for: client, version: issued, now: now))
            for presented in [Self.v1, Self.v2] {
                let valid = token.withUnsafeBufferPointer {
                    endpoint.verifyRegularToken($0, version: presented, remote: client, now: now)
                }
                #expect(valid == (issued == presented), "issued in \(issued), presented in \(presented)")
            }
            let moved = token.withUnsafeBufferPointer {
                endpoint.verifyRegularToken($0, version: issued, remote: elsewhere, now: now)
            }
            #expect(!moved, "still bound to the address")
        }
        #expect(endpoint.secrets.tokenSecret(forQUICVersion: Self.v1) == endpoint.secrets.tokenSecret)
        #expect(endpoint.secrets.tokenSecret(forQUICVersion: Self.v2) != endpoint.secrets.tokenSecret)
    }

    @Test func v1KeepsTheTicketKeysAndV2DerivesItsOwn() throws {
        let tickets = try VirtualNetwork().server.tls.tickets
        #expect(try tickets.bound(toQUICVersion: Self.v1) === tickets)
        let v2 = try tickets.bound(toQUICVersion: Self.v2)
        let again = try tickets.bound(toQUICVersion: Self.v2)
        func bytes(_ keys: ServerTicketKeys) -> [UInt8] {
            Array(UnsafeBufferPointer(start: keys.current.pointee.data, count: Int(keys.current.pointee.size)))
        }
        #expect(bytes(v2) != bytes(tickets))
        #expect(bytes(v2) == bytes(again), "every loop and relay of a fleet derives the same v2 keys")
        #expect(try bytes(tickets.bound(toALPN: "ptt/1")) != bytes(v2))
    }
}
