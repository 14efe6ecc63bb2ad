import ChildProcesses
import Foundation
import TransportCore
import TransportIO

/// Certificates the cases need: the DER size of a PEM chain's first certificate, and a long chain (leaf plus
/// intermediates under the test CA) made once per process with GnuTLS' certtool for amplificationlimit.
enum CertificateChain {
    /// The DER bytes of all the certificates in the PEM file at `path` (what a TLS Certificate message carries).
    static func derBytes(_ path: String) -> Int {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return 0 }
        var total = 0
        var rest = text[...]
        while let begin = rest.range(of: "-----BEGIN CERTIFICATE-----"),
            let end = rest.range(of: "-----END CERTIFICATE-----", range: begin.upperBound..<rest.endIndex)
        {
            let body = rest[begin.upperBound..<end.lowerBound].filter { !$0.isWhitespace }
            total += Data(base64Encoded: String(body))?.count ?? 0
            rest = rest[end.upperBound...]
        }
        return total
    }

    private static let made = Locked<(chain: String, key: String)?>(nil)

    /// A chain of `certificates` certificates (a leaf for localhost and `certificates - 1` intermediates, RSA-3072),
    /// rooted at `options.certificateAuthority`; cached for the process.
    static func long(_ options: MatrixOptions, certificates: Int = 9) async throws -> (chain: String, key: String) {
        if let cached = made.withLock({ $0 }) { return cached }
        let certtool = "/usr/bin/certtool"
        guard FileManager.default.isExecutableFile(atPath: certtool) else {
            throw MatrixError("certtool (Debian package gnutls-bin) is needed for the long certificate chain")
        }
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("ptt-matrix-chain-\(getpid())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var issuer = (cert: options.certificateAuthority, key: options.certificateAuthorityKey)
        var pems: [String] = []
        for level in 1...certificates {
            let isLeaf = level == certificates
            let base = "\(directory)/\(isLeaf ? "leaf" : "ca\(level)")"
            let template =
                isLeaf
                ? "cn = \"localhost\"\ndns_name = \"localhost\"\ntls_www_server\nsigning_key\n"
                : "cn = \"PTTTransport Matrix Intermediate \(level)\"\nca\ncert_signing_key\n"
            try (template + "serial = \(300 + level)\nexpiration_days = 2\n").write(
                toFile: base + ".tmpl", atomically: true, encoding: .utf8)
            for arguments in [
                ["--generate-privkey", "--key-type=rsa", "--bits=3072", "--outfile", base + ".key"],
                [
                    "--generate-certificate", "--load-privkey", base + ".key", "--load-ca-certificate", issuer.cert,
                    "--load-ca-privkey", issuer.key, "--template", base + ".tmpl", "--outfile", base + ".pem",
                ],
            ] {
                let run = try await runProgram(certtool, arguments, timeout: 120)
                guard !run.signaled && run.status == 0 else {
                    throw MatrixError("certtool \(arguments[0]) failed: \(run.stderr.suffix(200))")
                }
            }
            pems.insert(try String(contentsOfFile: base + ".pem", encoding: .utf8), at: 0)  // leaf first
            issuer = (base + ".pem", base + ".key")
        }
        let chain = "\(directory)/chain.pem"
        try pems.joined().write(toFile: chain, atomically: true, encoding: .utf8)
        let result = (chain, "\(directory)/leaf.key")
        made.withLock { $0 = result }
        return result
    }
}
