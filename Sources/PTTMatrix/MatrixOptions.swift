import Foundation

/// What `ptt-lab matrix` runs, and where it finds its certificates and peers.
package struct MatrixOptions: Sendable {
    /// The cases to run, in matrix order.
    package var cases: [MatrixCase] = MatrixCase.allCases
    /// The pairings to run.
    package var pairings: [Pairing] = Pairing.allCases
    /// Seconds of talk in the call cases (transferloss, transfercorruption, blackhole, rebind-*, transfer); the
    /// runner's figure is 60. Blackhole and rebinding cases use at least 8 s, so their events fall inside.
    package var callSeconds: Double = 60
    /// Connections in handshakeloss and handshakecorruption (the runner uses 50).
    package var connections = 50
    /// The one-way delay of the default path, in milliseconds (the runner's 15 ms).
    package var oneWayMilliseconds = 15.0
    /// Server certificate chain, key and the CA clients trust.
    package var certificate = "certs/server.pem"
    /// See `certificate`.
    package var privateKey = "certs/server.key"
    /// See `certificate`.
    package var certificateAuthority = "certs/ca.pem"
    /// The CA's private key: signs the amplificationlimit case's long chain.
    package var certificateAuthorityKey = "certs/ca.key"
    /// Where Tests/Peers and .venv-peers are.
    package var packageRoot = FileManager.default.currentDirectoryPath
    /// Seed of the path's loss, corruption and NAT generators.
    package var seed: UInt64 = 1
    /// Progress lines (to stderr in the CLI).
    package var progress: @Sendable (String) -> Void = { _ in }

    package init() {}
}
