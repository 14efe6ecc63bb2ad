import TransportCore

/// A local address to move a connection to: the numeric address of the network interface to send from, and a
/// port (0 picks a free one).
public struct LocalEndpoint: Hashable, Sendable, CustomStringConvertible {
    /// A numeric IPv4 or IPv6 address (without brackets) of this host, e.g. the cellular interface's address.
    public var host: String
    /// The UDP port to bind; 0 (the default) picks a free one.
    public var port: UInt16

    /// An endpoint on `host`, port `port` (0: any free port).
    public init(host: String, port: UInt16 = 0) {
        self.host = host
        self.port = port
    }

    /// Parses `HOST`, `HOST:PORT`, `[V6]` or `[V6]:PORT`; nil when the text is none of these.
    public init?(_ text: String) {
        guard let address = SocketAddress(parsing: text) ?? SocketAddress(host: text, port: 0) else { return nil }
        self.init(host: address.host, port: address.port)
    }

    /// `host:port`, with brackets around an IPv6 address.
    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

extension TransportConnection {
    /// Moves this connection to a new local address without a new handshake — for a phone whose OS reports a
    /// better network (Wi-Fi to cellular) mid-call. A new UDP socket is bound to `endpoint` and connected to the
    /// same server; the connection probes the new path (PATH_CHALLENGE, under a fresh connection ID the server
    /// issued) and moves there once the server answers, then closes the old socket. Until then it stays on the old
    /// path: audio datagrams and control streams keep flowing throughout, and streams lose nothing.
    ///
    /// - Parameters:
    ///   - endpoint: the local address to send from; its host must be a numeric address of this host.
    ///   - patience: how long to keep retrying while the connection is not ready to migrate (right after
    ///     `connect`, the server's HANDSHAKE_DONE and spare connection IDs are about one round trip away).
    ///     Zero (the default): throw `.migrationNotReady` at once.
    /// - Returns: the new local address (`host:port`) once the server answered on the new path; `statistics()`
    ///   reports it as `localAddress` and counts the move in `migrations`.
    /// - Throws: `TransportError` — `.migrationUnsupported` over TCP (reconnect instead), on a relay's connection,
    ///   or when the server disabled migration; `.migrationNotReady` when the handshake is not confirmed yet, the
    ///   server has not issued a spare connection ID, or another migration is still validating (retry shortly);
    ///   `.systemCallFailed` when `endpoint` cannot be bound; `.migrationFailed` when the server did not answer on
    ///   the new path (the connection stays on the old one); `.invalidConfiguration` when `endpoint.host` is not a
    ///   numeric address. The connection stays up in every case.
    @discardableResult
    public func migrate(to endpoint: LocalEndpoint, waitingUpTo patience: Duration = .zero) async throws -> String {
        guard let address = SocketAddress(host: endpoint.host, port: endpoint.port) else {
            throw TransportError(
                .invalidConfiguration,
                "\(endpoint.host) is not a numeric IPv4 or IPv6 address; pass the address of the local interface to use"
            )
        }
        let deadline = ContinuousClock.now + patience
        while true {
            do {
                return try await backend.migrate(to: address)
            } catch let error as TransportError where error.code == .migrationNotReady && .now < deadline {
                try await Task.sleep(for: .milliseconds(5))
            }
        }
    }
}
