import ChildProcesses
import Foundation

/// A realistic but heavy server chain made at test time with GnuTLS' certtool: an RSA-4096 leaf for localhost and
/// 127.0.0.1 under three RSA-4096 intermediates under the test root (`certs/ca.pem`, which clients trust). Its
/// certificates alone are several times a client's 1200-byte Initial, so the server's first flight cannot fit in
/// the 3× anti-amplification budget.
struct LargeCertificateChain {
    static let certtool = "/usr/bin/certtool"
    static var available: Bool { FileManager.default.isExecutableFile(atPath: certtool) }

    /// The temporary directory holding everything; remove it with `remove()`.
    let directory: String
    /// leaf, intermediate 3, 2, 1 (the root is not sent).
    var chain: String { "\(directory)/chain.pem" }
    var key: String { "\(directory)/leaf.key" }
    /// The DER size of the certificates the server sends.
    let certificateBytes: Int

    static func make() async throws -> LargeCertificateChain {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("ptt-large-chain-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var issuer = (cert: Fixtures.ca, key: "\(Fixtures.certs)/ca.key")
        var pems: [String] = []
        for (index, name) in ["int1", "int2", "int3", "leaf"].enumerated() {
            let key = "\(directory)/\(name).key"
            let cert = "\(directory)/\(name).pem"
            let template = "\(directory)/\(name).tmpl"
            let role =
                name == "leaf"
                ? "cn = \"localhost\"\ndns_name = \"localhost\"\nip_address = \"127.0.0.1\"\ntls_www_server\nsigning_key\n"
                : "cn = \"PTTTransport Test Intermediate \(index + 1)\"\nca\ncert_signing_key\n"
            try "\(role)serial = \(200 + index)\nexpiration_days = 2\n".write(
                toFile: template, atomically: true,
                encoding: .utf8)
            try await run(["--generate-privkey", "--key-type=rsa", "--bits=4096", "--outfile", key])
            try await run([
                "--generate-certificate", "--load-privkey", key, "--load-ca-certificate", issuer.cert,
                "--load-ca-privkey", issuer.key, "--template", template, "--outfile", cert,
            ])
            pems.insert(try String(contentsOfFile: cert, encoding: .utf8), at: 0)
            issuer = (cert, key)
        }
        let chain = pems.joined()
        try chain.write(toFile: "\(directory)/chain.pem", atomically: true, encoding: .utf8)
        return LargeCertificateChain(directory: directory, certificateBytes: derBytes(chain))
    }

    func remove() { try? FileManager.default.removeItem(atPath: directory) }

    private static func run(_ arguments: [String]) async throws {
        let result = try await runProgram(certtool, arguments)
        guard result.status == 0 else {
            throw NSError(
                domain: "certtool", code: Int(result.status),
                userInfo: [NSLocalizedDescriptionKey: "certtool \(arguments.joined(separator: " ")): \(result.stderr)"])
        }
    }

    /// The total DER size of the PEM certificates in `pem`.
    private static func derBytes(_ pem: String) -> Int {
        pem.components(separatedBy: "-----END CERTIFICATE-----").map { block in
            let body = block.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
            return Data(base64Encoded: body)?.count ?? 0
        }.reduce(0, +)
    }
}
