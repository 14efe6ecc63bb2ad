import Dispatch
import TransportCore

/// The addresses of the shared store's host, resolved again off the event loops: at start (a host that does not
/// resolve yet leaves the book empty, and the relay starts anyway with 0-RTT refused), and whenever a connection
/// is about to be made again (`refresh`), so relays follow a failover that moved the name to another address. The
/// loops read the latest answer and never wait for the resolver.
package final class RedisAddressBook: Sendable {
    package let host: String
    package let port: UInt16
    private let addresses: Locked<[SocketAddress]>
    /// Whether a resolution is queued or running, and when the last one started (monotonic ns).
    private let resolving = Locked<(busy: Bool, last: UInt64)>((false, 0))
    private let queue = DispatchQueue(label: "ptt-redis-resolver")
    /// The least time between two resolutions (a store that keeps refusing is not a resolver flood).
    package static let minimumInterval: UInt64 = 500_000_000

    /// Resolves `host` now, on the calling thread (not an event loop); empty when it does not resolve.
    package init(host: String, port: UInt16) {
        self.host = host
        self.port = port
        addresses = Locked((try? AddressResolver.resolve(host: host, port: port)) ?? [])
        resolving.withLock { $0.last = MonotonicClock.now() }
    }

    /// The latest addresses (empty while the host does not resolve).
    package var current: [SocketAddress] { addresses.withLock { $0 } }

    /// Resolves the host again on the resolver's queue (at most one at a time, at most every `minimumInterval`);
    /// a failure keeps the addresses known.
    package func refresh() {
        let now = MonotonicClock.now()
        let go = resolving.withLock { state -> Bool in
            guard !state.busy, now &- state.last >= Self.minimumInterval else { return false }
            state = (true, now)
            return true
        }
        guard go else { return }
        queue.async { [self] in
            if let fresh = try? AddressResolver.resolve(host: host, port: port), !fresh.isEmpty {
                addresses.withLock { $0 = fresh }
            }
            resolving.withLock { $0.busy = false }
        }
    }
}
