import PTTTransport
import TransportCore

/// How the relays of a fleet connect to each other (see the article *Groups across a fleet*): each relay listens for
/// trunks on `listen` (the address it publishes as ``FleetConfiguration/trunkAddress``) with ALPN `ptt-trunk/1`,
/// and dials the live relays whose names sort after its own, so each pair of relays has one trunk.
///
/// Both ends authenticate: the dialer verifies the acceptor's certificate against `trust` (as every client of this
/// library does), and the acceptor admits a dialer only once it proved it holds the fleet's `secret` (an HMAC of
/// the secret, a fresh challenge and both relays' names) within `proofDeadline`.
public struct TrunkConfiguration: Sendable {
    /// Where this relay accepts trunks (`host:port`; port 0 picks one, then publish what was bound).
    public var listen: String
    /// The certificate chain (PEM) the trunk listener presents.
    public var certificateChain: String
    /// Its private key (PEM).
    public var privateKey: String
    /// What the dialer trusts for the other relays' trunk certificates.
    public var trust: TrustRoots
    /// The name every relay's trunk certificate carries (nil, the default: the host of each peer's trunk address).
    public var serverName: String?
    /// The fleet's shared secret (32 bytes, the same file on every relay: ``TrunkConfiguration/loadSecret(path:)``).
    public var secret: [UInt8]
    /// How long a dialer has to prove the secret before its connection is closed (default 2 s).
    public var proofDeadline: Duration

    /// A trunk listener on `listen` with the given certificate and key, trusting `trust`, proving `secret`; the
    /// other parameters have the defaults described on their properties.
    public init(
        listen: String, certificateChain: String, privateKey: String, trust: TrustRoots, secret: [UInt8]
    ) {
        self.listen = listen
        self.certificateChain = certificateChain
        self.privateKey = privateKey
        self.trust = trust
        self.secret = secret
        serverName = nil
        proofDeadline = .seconds(2)
    }

    /// The fleet secret in `path`: exactly 32 bytes (make one with `head -c 32 /dev/urandom > fleet.secret`).
    ///
    /// - Throws: `invalidConfiguration` when the file cannot be read or holds another number of bytes.
    public static func loadSecret(path: String) throws(TransportError) -> [UInt8] {
        try SecretFile.load(path: path, length: secretLength)
    }

    /// The length of a fleet secret.
    public static let secretLength = 32

    /// The trunks' application protocol.
    public static let alpn = "ptt-trunk/1"

    /// Checks the secret and the deadline.
    ///
    /// - Throws: `invalidConfiguration` for a secret that is not 32 bytes or a deadline under 10 ms.
    public func validate() throws(TransportError) {
        guard secret.count == Self.secretLength else {
            throw TransportError(
                .invalidConfiguration, "the fleet secret is \(secret.count) bytes; it must be \(Self.secretLength)")
        }
        guard proofDeadline >= .milliseconds(10) else {
            throw TransportError(.invalidConfiguration, "the trunk proof deadline must be at least 10 ms")
        }
    }
}

extension TransportError.Code {
    /// A trunk was refused: the dialer did not prove the fleet secret in time, sent what is not a trunk message,
    /// named itself wrongly, or the acceptor is not the relay it dialed. Check that every relay of the fleet has
    /// the same fleet secret and trusts the others' certificates.
    public static let trunkRefused = TransportError.Code("trunk-refused")
}
