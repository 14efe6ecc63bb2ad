import CommandLineSupport
import Foundation
import PTTMatrix

/// `ptt-lab matrix`: the interop runner's cases on the emulated path, and the QMux cases on loopback (see PTTMatrix).
enum MatrixCommand {
    static let usage = """
        usage: ptt-lab matrix [--cases a,b] [--json] [--duration S] [--connections N] [--seed N]
                              [--pairings ours-ours,aioquic-ours,ours-aioquic,moq-ours,ours-moq]
                              [--cert PEM --key PEM --ca PEM --ca-key PEM] [--package-root DIR]
        """

    static func run(_ raw: [String]) async throws {
        let args = try Arguments(
            raw,
            options: [
                "cases", "pairings", "duration", "connections", "seed", "cert", "key", "ca", "ca-key",
                "package-root",
            ],
            flags: ["json"])
        guard args.positionals.isEmpty else {
            throw Arguments.Failure(description: "unexpected \(args.positionals[0])")
        }
        var options = MatrixOptions()
        if let list = args.value("cases") { options.cases = try names(list, "case") }
        if let list = args.value("pairings") { options.pairings = try names(list, "pairing") }
        options.callSeconds = try args.number("duration") ?? options.callSeconds
        guard options.callSeconds >= 1 && options.callSeconds <= 3_600 else {
            throw Arguments.Failure(description: "--duration is seconds of talk, 1 to 3600")
        }
        options.connections = try args.integer("connections", default: options.connections)
        guard options.connections >= 1 && options.connections <= 1_000 else {
            throw Arguments.Failure(description: "--connections must be 1 to 1000")
        }
        options.seed = UInt64(try args.integer("seed", default: 1))
        options.certificate = args.value("cert") ?? options.certificate
        options.privateKey = args.value("key") ?? options.privateKey
        options.certificateAuthority = args.value("ca") ?? options.certificateAuthority
        options.certificateAuthorityKey = args.value("ca-key") ?? options.certificateAuthorityKey
        if let root = args.value("package-root") { options.packageRoot = root }
        for path in [options.certificate, options.privateKey, options.certificateAuthority]
        where !FileManager.default.isReadableFile(atPath: path) {
            throw Arguments.Failure(
                description: "cannot read \(path); run from the repository root or pass --cert/--key/--ca")
        }
        options.progress = { line in FileHandle.standardError.write(Data("\(line)\n".utf8)) }
        let cells = await Matrix.run(options)
        print(args.flag("json") ? MatrixReport.json(cells) : MatrixReport.table(cells))
    }

    /// The comma-separated `list` as values of `T`; an unknown name fails with the valid ones.
    private static func names<T: RawRepresentable & CaseIterable>(_ list: String, _ kind: String) throws -> [T]
    where T.RawValue == String {
        try list.split(separator: ",").map { name in
            guard let found = T(rawValue: String(name)) else {
                throw Arguments.Failure(
                    description: "unknown \(kind) \(name); one of "
                        + T.allCases.map(\.rawValue).joined(separator: ","))
            }
            return found
        }
    }
}
