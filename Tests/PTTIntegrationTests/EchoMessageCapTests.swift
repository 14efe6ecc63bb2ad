import ChildProcesses
import Foundation
import PTTTransport
import TestSupport
import Testing

/// `ptt-transport serve --events` decodes every echoed stream to report its messages. A client that announces a
/// huge message (a 2^61-byte length prefix) and then streams bytes must not make the relay keep them: the decoder is
/// capped at the relay's maximum message size, and the stream ends with `messageTooLargeCode`.
@Suite("The echo relay's message decoder is capped", .serialized, .integration)
struct EchoMessageCapTests {
    /// A QUIC varint announcing a 2^61-byte message (8-byte form: `0b11` flag, then the value).
    static let hugePrefix: [UInt8] = [0xE0, 0, 0, 0, 0, 0, 0, 0]
    /// What the attacker streams after the prefix; without a cap the relay would keep all of it.
    static let attackBytes = 48 * 1024 * 1024

    @Test func oversizedPrefixEndsThatStreamAndKeepsNoBytes() async throws {
        let relay = try await startChildRelay()
        defer { relay.stopNow() }
        let address = try #require(ServerAddress(relay.address))
        let call = try await HostilePeerTests.Call(address)
        #expect(try await call.roundTrip("before the attack"))
        let before = try #require(relay.peakResidentKiB())

        let attacker = try await Fixtures.client().connect(to: address)
        let stream = try await attacker.openStream()
        // Read the echo as it comes, so the relay's writes never hold back its reads.
        let reader = Task<TransportError?, Never> {
            do {
                while try await stream.nextChunk() != nil {}
                return nil
            } catch {
                return error as? TransportError
            }
        }
        let (sent, writeError) = try await withTimeout(.seconds(60)) {
            try await Self.stream(Self.attackBytes, after: Self.hugePrefix, on: stream)
        }
        // Unstopped (no cap), the writer ends the stream so that the echo ends too.
        if writeError == nil { try? await stream.finish() }
        let readError = try await withTimeout(.seconds(30)) { await reader.value }
        let after = try #require(relay.peakResidentKiB())
        // The writer learns of the STOP_SENDING (or of the reset that followed it) within a few writes.
        #expect(writeError != nil && sent < 4 * 1024 * 1024, "the attacker wrote \(sent) bytes without being stopped")
        #expect(readError?.code == .streamReset, "\(String(describing: readError))")
        #expect(readError?.applicationErrorCode == messageTooLargeCode, "\(String(describing: readError))")
        #expect(after - before < 8 * 1024, "relay peak RSS grew from \(before) KiB to \(after) KiB for \(sent) bytes")
        #expect(relay.isRunning, "the relay died (status \(relay.terminationStatus))")
        #expect(try await call.roundTrip("after the attack"), "the call in progress stopped working")
        let next = try await HostilePeerTests.Call(address)
        #expect(try await next.roundTrip("next client"), "the next client was not served")
        await next.connection.close()
        await call.connection.close()
        await attacker.close()

        let (status, events) = await relay.stop()
        #expect(status == 0, "serve exited with \(status): \(events)")
        #expect(events.contains(#""event":"stream_refused""#), "\(events)")
        #expect(
            events.contains("message-too-large: the peer announced a 2305843009213693952-byte message"), "\(events)")
    }

    /// Writes `prefix`, then up to `count` bytes in 64 KiB writes; returns how many went out and the error that
    /// stopped the writer (nil when all of them did).
    static func stream(
        _ count: Int, after prefix: [UInt8], on stream: TransportStream
    ) async throws -> (Int, TransportError?) {
        let block = [UInt8](repeating: 0x41, count: 64 * 1024)
        var sent = 0
        do {
            try await stream.write(prefix)
            while sent < count {
                try await stream.write(block)
                sent += block.count
                try Task.checkCancellation()
            }
        } catch let error as TransportError {
            return (sent, error)
        }
        return (sent, nil)
    }
}
