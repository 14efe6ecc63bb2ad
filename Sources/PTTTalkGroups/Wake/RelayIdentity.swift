import TransportCore

/// Which relay holds a burst: the name and port its phones connect to (the name its certificate carries), and its
/// QUIC-LB server ID when it has one (`ServerConfiguration.quicLB`), which a QUIC-LB load balancer in front of a
/// fleet sharing the name routes by.
public struct RelayIdentity: Hashable, Sendable, CustomStringConvertible {
    /// The server name phones connect to and verify the certificate for.
    public var serverName: String
    /// The port.
    public var port: UInt16
    /// The relay's QUIC-LB server ID (1 to 15 bytes), nil without QUIC-LB.
    public var quicLBServerID: [UInt8]?

    /// A relay identity.
    public init(serverName: String, port: UInt16, quicLBServerID: [UInt8]? = nil) {
        self.serverName = serverName
        self.port = port
        self.quicLBServerID = quicLBServerID
    }

    /// `name:port`, with `#serverID` in hex when there is one.
    public var description: String {
        "\(serverName):\(port)" + (quicLBServerID.map { "#" + Hex.string($0) } ?? "")
    }
}
