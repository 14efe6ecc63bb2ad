import PTTTransport
import TestSupport
import Testing

/// A link says why: `reconnecting` carries the failure that made it retry, and a link whose last reference is
/// released ends with `.stopped` and an error that says so (issue 33).
@Suite("Link status reasons", .integration)
struct LinkStatusReasonTests {
    static func client() -> TransportClient {
        TransportClient(
            configuration: ClientConfiguration(
                serverName: "localhost", trust: .caFile(Fixtures.ca), handshakeTimeout: .seconds(1),
                fallback: .tcpOnly))
    }

    @Test func reconnectingCarriesTheFailure() async throws {
        // Port 9 on loopback (discard): nothing listens, so TCP is refused at once.
        let link = TransportLink(client: Self.client(), to: ServerAddress(host: "127.0.0.1", port: 9))
        defer { link.stop() }
        let found = try await withTimeout { () -> (LinkStatus, TransportError)? in
            for await status in link.statusUpdates {
                if case .reconnecting(_, _, let reason) = status { return (status, reason) }
            }
            return nil
        }
        let (status, error) = try #require(found, "the link retried")
        #expect(!error.message.isEmpty)
        #expect("\(status)".contains(error.message), "the status prints its reason: \(status)")
    }

    @Test func releasingTheLastReferenceStopsWithAnError() async throws {
        var link: TransportLink? = TransportLink(
            client: Self.client(), to: ServerAddress(host: "127.0.0.1", port: 9))
        let updates = link!.statusUpdates
        link = nil
        let last = try await withTimeout { () -> LinkStatus? in
            var last: LinkStatus?
            for await status in updates { last = status }
            return last
        }
        guard case .stopped(let error?) = last else {
            Issue.record("expected .stopped with an error, got \(String(describing: last))")
            return
        }
        #expect(error.code == .connectionClosed && error.message.contains("last reference"))
    }
}
