import Foundation

@testable import PTTBench

extension BenchOptions {
    /// The options a test runs the benchmark with: this repository's test PKI and package root, whatever the
    /// working directory.
    static func inRepository() -> BenchOptions {
        var options = BenchOptions()
        let root = #filePath.components(separatedBy: "/Tests/")[0]
        options.certificate = "\(root)/certs/server.pem"
        options.privateKey = "\(root)/certs/server.key"
        options.certificateAuthority = "\(root)/certs/ca.pem"
        options.packageRoot = root
        return options
    }
}
