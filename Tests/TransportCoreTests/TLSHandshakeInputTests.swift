import Testing

@testable import TransportCore

/// What a TLS server session reads before its handshake completes (issue 21, item 9), sans-IO: a ClientHello cut
/// into several records that arrive in one read is answered from that read (GnuTLS 3.7.9 reads one record per
/// `gnutls_handshake` call), and a peer that keeps sending handshake records is failed past
/// `maximumClientFlights` instead of being read without end.
@Suite("TLS handshake input (sans-IO)")
struct TLSHandshakeInputTests {
    /// `flight` (plaintext handshake records) with its handshake bytes cut into `count` records.
    static func split(_ flight: [UInt8], into count: Int) -> [UInt8] {
        var message: [UInt8] = []
        var index = 0
        while index + 5 <= flight.count {
            let length = Int(flight[index + 3]) << 8 | Int(flight[index + 4])
            if flight[index] == 0x16 { message += flight[(index + 5)..<(index + 5 + length)] }
            index += 5 + length
        }
        let size = (message.count + count - 1) / count
        return stride(from: 0, to: message.count, by: size).flatMap { start -> [UInt8] in
            let part = message[start..<min(start + size, message.count)]
            return [0x16, 0x03, 0x01, UInt8(part.count >> 8), UInt8(part.count & 0xff)] + part
        }
    }

    @Test(arguments: [2, 4, 16])
    func aClientHelloInSeveralRecordsIsAnsweredFromOneRead(records: Int) throws {
        let pair = try TLSStreamSessionTests.pair(server: TLSStreamSessionTests.serverContext())
        _ = try pair.client.advance()
        let flight = Self.split(pair.client.takeCiphertext(), into: records)
        flight.withUnsafeBytes { pair.server.receive($0) }
        _ = try pair.server.advance()
        #expect(pair.server.hasCiphertext, "the server did not answer a ClientHello in \(records) records")
        #expect(pair.server.bufferedCiphertext == 0)
        pair.server.takeCiphertext().withUnsafeBytes { pair.client.receive($0) }
        try pair.run()
        #expect(pair.client.isHandshakeComplete && pair.server.isHandshakeComplete)
    }

    @Test func oneByteHandshakeRecordsFailPastTheLimit() throws {
        let context = try TLSStreamSessionTests.serverContext()
        let server = try TLSStreamSession(server: context, alpn: "ptt/1-qx01")
        // A ClientHello announced as 131,000 bytes, one byte per record, about 64 KiB of records per read.
        let message: [UInt8] = [0x01, 0x01, 0xff, 0xb8, 0x03, 0x03] + [UInt8](repeating: 0, count: 130_998)
        var failure: TransportError?
        var fed = 0
        for start in stride(from: 0, to: message.count, by: 10_000) where failure == nil {
            var records: [UInt8] = []
            for byte in message[start..<min(start + 10_000, message.count)] {
                records += [0x16, 0x03, 0x01, 0x00, 0x01, byte]
            }
            fed += records.count
            records.withUnsafeBytes { server.receive($0) }
            do { _ = try server.advance() } catch { failure = error }
            if failure == nil { #expect(server.bufferedCiphertext == 0, "a read was not consumed") }
        }
        #expect(failure?.code == .protocolViolation, "\(String(describing: failure)) after \(fed) bytes")
        #expect(fed <= TLSStreamSession.maximumClientFlights + 60_000, "read \(fed) bytes before failing")
        let next = try TLSStreamSessionTests.pair(server: context)
        try next.run()
        #expect(next.server.isHandshakeComplete)
    }
}
