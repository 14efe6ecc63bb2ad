import CommandLineSupport
import PTTTransport

/// `--resolve NAME:PORT:ADDR[,ADDR…]` (curl's convention, repeatable): the addresses to use for NAME:PORT instead of
/// asking the resolver; an IPv6 address may stand in brackets.
enum ResolveOption {
    static func parse(_ values: [String]) throws -> [ServerAddress: [String]] {
        var table: [ServerAddress: [String]] = [:]
        for value in values {
            let parts = value.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard parts.count == 3, !parts[0].isEmpty, let port = UInt16(parts[1]) else {
                throw Arguments.Failure(description: "--resolve \(value): use NAME:PORT:ADDR[,ADDR...]")
            }
            let addresses = parts[2].split(separator: ",").map { address in
                String(address.hasPrefix("[") && address.hasSuffix("]") ? address.dropFirst().dropLast() : address)
            }
            guard !addresses.isEmpty else {
                throw Arguments.Failure(description: "--resolve \(value): no address after NAME:PORT:")
            }
            table[ServerAddress(host: String(parts[0]), port: port), default: []] += addresses
        }
        return table
    }
}
