import TransportCore
import TransportIO

extension EmulatedNetwork {
    /// A second client address on the emulated path (e.g. 198.18.0.3): adds `address` to the TUN device of
    /// `side`'s namespace, in the path's /24, so a client can bind there and reach the other side through the same
    /// delay line — a phone's second network interface. Adding an address that is already there is not an error.
    package func addAddress(_ address: String, on side: Side) throws(TransportError) {
        let namespace = side == .client ? clientNamespace : serverNamespace
        let existing = side == .client ? Self.clientAddress : Self.serverAddress
        // The device that holds the side's first address: `N: tunX    inet 198.18.0.1/24 ...`.
        let listing = try Self.ip(["-n", namespace, "-o", "-4", "addr", "show", "to", existing])
        guard let device = listing.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first else {
            throw TransportError(.invalidConfiguration, "no device holds \(existing) in namespace \(namespace)")
        }
        let present = try Self.ip(["-n", namespace, "-o", "-4", "addr", "show", "to", address])
        guard present.isEmpty else { return }
        try Self.ip(["-n", namespace, "addr", "add", "\(address)/24", "dev", String(device)])
    }
}
