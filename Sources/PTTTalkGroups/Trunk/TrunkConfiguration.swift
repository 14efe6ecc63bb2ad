import PTTTransport
import TransportCore
import TransportIO

/// How the relays of a fleet connect to each other (see the article *Groups across a fleet*): each relay accepts
/// trunks with ALPN `ptt-trunk/1`, on its own listener at `listen` or (``sharesRelayListener``) on the relay's
/// QUIC listener beside its phones, publishes that address as ``FleetConfiguration/trunkAddress``, and dials the
/// live relays whose names sort after its own, so each pair of relays has one trunk.
///
/// Both ends authenticate: the dialer verifies the acceptor's certificate against `trust` (as every client of this
/// library does), and the acceptor admits a dialer only once it proved it holds the fleet's `secret` (an HMAC of
/// the secret, a fresh challenge and both relays' names) within `proofDeadline`.
public struct TrunkConfiguration: Sendable {
    /// Where this relay accepts trunks (`host:port`; port 0 picks one, then publish what was bound). With
    /// ``sharesRelayListener``: the address published for the relay's own listener (port 0: its bound port).
    public var listen: String
    /// Accept trunks on the relay server's QUIC listener (one port for phones and trunks; bind the server with
    /// ``acceptTrunks(on:)``) instead of binding a listener at `listen`. `listen` must then name a specific host
    /// the other relays reach, not a wildcard address. Default false.
    public var sharesRelayListener: Bool
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
    /// The fleet's previous secret, during a rotation (default nil): a dialer proves both, and an acceptor admits a
    /// proof of either, so relays still on the previous secret and relays on the new one trunk to each other
    /// whichever dials. Drop it once every relay has the new secret.
    public var previousSecret: [UInt8]?
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
        previousSecret = nil
        serverName = nil
        proofDeadline = .seconds(2)
        sharesRelayListener = false
    }

    /// Makes a relay server's configuration accept trunks on its QUIC listener (``alpn`` among its
    /// `additionalALPNs`), for a relay whose trunk configuration ``sharesRelayListener``.
    public static func acceptTrunks(on server: inout ServerConfiguration) {
        if !server.additionalALPNs.contains(alpn) { server.additionalALPNs.append(alpn) }
    }

    /// The fleet secret derived from a secret every relay of the fleet already shares (the session ticket key file,
    /// or the stateless reset secret): HMAC-SHA256(`sharedSecret`, a label of its own), so knowing the trunk
    /// secret reveals nothing of the file it came from, and replacing the file on every relay replaces it (trunks
    /// prove the new one when they next connect).
    ///
    /// - Throws: `invalidConfiguration` for fewer than 32 bytes, `internalError` when GnuTLS fails.
    public static func derivedSecret(from sharedSecret: [UInt8]) throws(TransportError) -> [UInt8] {
        guard sharedSecret.count >= secretLength else {
            throw TransportError(
                .invalidConfiguration,
                "a fleet secret is derived from at least \(secretLength) shared bytes, not \(sharedSecret.count)")
        }
        guard let secret = HMACSHA256.mac(key: sharedSecret, message: Array("ptt-trunk/1 fleet secret".utf8)) else {
            throw TransportError(.internalError, "GnuTLS could not derive the fleet secret")
        }
        return secret
    }

    /// The first DNS name of the certificate (PEM) at `path`, the name a fleet whose relays share one
    /// certificate verifies its trunks for; nil when it names no host.
    ///
    /// - Throws: `invalidConfiguration` when the file cannot be read or holds no certificate.
    package static func certificateName(path: String) throws(TransportError) -> String? {
        try CertificateNames.dnsNames(of: PEMFile.read(path)).first
    }

    /// The trunk address published for a relay listener bound at `bound` (``sharesRelayListener``): `listen`, with
    /// the bound port when it says port 0.
    ///
    /// - Throws: `invalidConfiguration` when `listen` is not `host:port` or names a wildcard host (0.0.0.0, ::),
    ///   which the other relays cannot dial.
    package func publishedAddress(bound: ServerAddress) throws(TransportError) -> ServerAddress {
        guard var address = ServerAddress(listen) else {
            throw TransportError(.invalidConfiguration, "the trunk address must be HOST:PORT, not \(listen)")
        }
        guard !["0.0.0.0", "::", "", "*"].contains(address.host) else {
            throw TransportError(
                .invalidConfiguration,
                "the relay listens on the wildcard address \(listen), which other relays cannot dial: give the "
                    + "address they reach it at (serve --trunk-listen HOST:PORT)")
        }
        if address.port == 0 { address.port = bound.port }
        return address
    }

    /// The fleet secret in `path`: exactly 32 bytes (make one with `head -c 32 /dev/urandom > fleet.secret`).
    ///
    /// - Throws: `invalidConfiguration` when the file cannot be read or holds another number of bytes.
    public static func loadSecret(path: String) throws(TransportError) -> [UInt8] {
        try SecretFile.load(path: path, length: secretLength)
    }

    /// The length of a fleet secret.
    public static let secretLength = 32

    /// The secrets a trunk proves and admits: the current one, then the previous one during a rotation.
    var secrets: [[UInt8]] { [secret] + (previousSecret.map { [$0] } ?? []) }

    /// The trunks' application protocol.
    public static let alpn = "ptt-trunk/1"

    /// Checks the secret and the deadline.
    ///
    /// - Throws: `invalidConfiguration` for a secret that is not 32 bytes or a deadline under 10 ms.
    public func validate() throws(TransportError) {
        for secret in secrets where secret.count != Self.secretLength {
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
