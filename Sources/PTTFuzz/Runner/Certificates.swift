/// The relay's certificate chain and key, and the CA clients trust.
public struct Certificates: Sendable {
    /// The relay's certificate chain (PEM path).
    public var chain: String
    /// The relay's private key (PEM path).
    public var key: String
    /// The CA certificate clients trust (PEM path).
    public var authority: String

    /// The files under `directory` (the repository's certs/).
    public init(directory: String) {
        chain = "\(directory)/server.pem"
        key = "\(directory)/server.key"
        authority = "\(directory)/ca.pem"
    }
}
