import Foundation
import TransportCore

/// Paths to the test PKI in `certs/` (see certs/generate.sh).
enum TestCertificates {
    static let directory: String = {
        if let override = ProcessInfo.processInfo.environment["PTT_TEST_CERTS"] { return override }
        var url = URL(fileURLWithPath: #filePath)
        while url.path != "/" {
            url.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) {
                return url.appendingPathComponent("certs").path
            }
        }
        return "certs"
    }()
    static var ca: String { "\(directory)/ca.pem" }
    static var otherCA: String { "\(directory)/other-ca.pem" }
    static var serverCert: String { "\(directory)/server.pem" }
    static var serverKey: String { "\(directory)/server.key" }
    static var expiredCert: String { "\(directory)/expired.pem" }
    static var expiredKey: String { "\(directory)/expired.key" }
    static var untrustedCert: String { "\(directory)/untrusted.pem" }
    static var untrustedKey: String { "\(directory)/untrusted.key" }

    /// The PEM file at `path` as the core's TLS contexts take it (they read no file), named by its path.
    static func pem(_ path: String) -> PEMData {
        PEMData([UInt8](FileManager.default.contents(atPath: path) ?? Data()), origin: path)
    }
}
