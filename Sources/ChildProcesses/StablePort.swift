/// Ports for servers that must come back on the same port (a relay restarted mid-test or mid-benchmark): outside
/// the kernel's ephemeral range (32768–60999), so no client socket is handed the port between the two binds.
package enum StablePort {
    /// Where stable ports are drawn from.
    package static let range: Range<UInt16> = 20_000..<30_000

    /// A random port from `range`.
    package static func random() -> UInt16 { UInt16.random(in: range) }

    /// Calls `bind` with random ports from `range` until one is free (at most `attempts` tries); rethrows the last
    /// failure.
    package static func first<T>(attempts: Int = 50, _ bind: (UInt16) async throws -> T) async throws -> T {
        var lastError: (any Error)?
        for _ in 0..<max(1, attempts) {
            do {
                return try await bind(random())
            } catch {
                lastError = error
            }
        }
        throw lastError!
    }
}
