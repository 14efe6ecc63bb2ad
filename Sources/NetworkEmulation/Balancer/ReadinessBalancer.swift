import Foundation
import Glibc
import Synchronization
import TransportCore
import TransportIO

/// A layer-4 load balancer for the lab, as an operator runs one in front of a fleet: one virtual address (UDP and
/// TCP on one port) whose new flows go to the relays that answer `/readyz` with 200, polled every `pollInterval`
/// (100 ms by default), each to one of them by a hash of the client's address and port. A flow (UDP: the client's address and port; TCP: a connection) stays with the relay it was
/// given for its whole life, whatever that relay's readiness later says, so a draining relay keeps its calls while
/// new flows — a phone moving off it — go elsewhere. A new flow while no relay is ready is dropped (counted).
///
/// Call `stop()` when done: its threads hold it until then.
///
/// Threads of its own (one for the UDP flows, one polling readiness, one accepting TCP and one per TCP connection),
/// blocking sockets: a lab tool, never on a relay's event loop.
package final class ReadinessBalancer: Sendable {
    /// One relay behind the virtual address.
    package struct Backend: Sendable {
        package var udp: SocketAddress
        package var tcp: SocketAddress?
        /// Where its `/readyz` is.
        package var admin: SocketAddress

        package init(udp: SocketAddress, tcp: SocketAddress? = nil, admin: SocketAddress) {
            self.udp = udp
            self.tcp = tcp
            self.admin = admin
        }
    }

    /// A change of a relay's readiness as the balancer saw it.
    package struct ReadinessChange: Sendable {
        package var backend: Int
        package var ready: Bool
        package var at: ContinuousClock.Instant
    }

    /// What the balancer did since it started.
    package struct Statistics: Sendable {
        /// New flows (UDP and TCP) given to each relay.
        package var flows: [Int]
        /// The relay given the latest new UDP flow (with one phone: where its current connection went).
        package var lastUDPFlow: Int?
        /// New flows dropped because no relay was ready.
        package var flowsWithoutBackend = 0
        /// Datagrams forwarded each way.
        package var datagramsIn = 0
        package var datagramsOut = 0
        /// Every readiness change seen (the first poll's states included).
        package var changes: [ReadinessChange] = []
    }

    /// The virtual address (UDP; TCP on the same port).
    package let address: SocketAddress
    package let pollInterval: Duration
    let backends: [Backend]
    let state: Mutex<State>
    private let udp: BalancerUDPFlows
    private let tcp: BalancerTCPSplice

    struct State {
        var ready: [Bool]
        var stopped = false
        var statistics: Statistics
    }

    /// Binds the virtual address on `host` (a port the kernel picks, the same for TCP) and starts forwarding and
    /// polling. Relays count as not ready until their first poll answers.
    package init(backends: [Backend], host: String = "127.0.0.1", pollInterval: Duration = .milliseconds(100)) throws {
        precondition(!backends.isEmpty, "a balancer needs relays")
        self.backends = backends
        self.pollInterval = pollInterval
        state = Mutex(
            State(ready: backends.map { _ in false }, statistics: Statistics(flows: backends.map { _ in 0 })))
        var attempt = 0
        while true {
            attempt += 1
            let flows = try BalancerUDPFlows(host: host)
            do {
                tcp = try BalancerTCPSplice(address: flows.address)
                udp = flows
                break
            } catch {
                flows.close()
                if attempt >= 20 { throw error }  // the port the kernel chose for UDP is taken for TCP: another
            }
        }
        address = udp.address
        let polling = Thread { [self] in pollReadiness() }
        polling.start()
        Thread { [self] in udp.run(self) }.start()
        Thread { [self] in tcp.run(self) }.start()
    }

    /// Stops forwarding (within a poll interval) and closes every socket.
    package func stop() { state.withLock { $0.stopped = true } }

    var stopped: Bool { state.withLock { $0.stopped } }

    package var statistics: Statistics { state.withLock { $0.statistics } }

    /// Whether relay `index` answered its last poll with 200.
    package func isReady(_ index: Int) -> Bool { state.withLock { $0.ready[index] } }

    /// The relay for a new flow from `client`: one of the ready relays (with a TCP address for a TCP flow) picked by
    /// a hash of the client's address and port, as a stateless layer-4 balancer hashes the 4-tuple — a phone's new
    /// socket lands on any ready relay, the one it leaves included; nil when none is ready.
    func choose(tcp: Bool, client: SocketAddress) -> Int? {
        state.withLock { state in
            let ready = backends.indices.filter { state.ready[$0] && (!tcp || backends[$0].tcp != nil) }
            guard !ready.isEmpty else {
                state.statistics.flowsWithoutBackend += 1
                return nil
            }
            let index = ready[Int(UInt(bitPattern: client.hashValue) % UInt(ready.count))]
            state.statistics.flows[index] += 1
            if !tcp { state.statistics.lastUDPFlow = index }
            return index
        }
    }

    func count(datagramsIn: Int = 0, datagramsOut: Int = 0) {
        state.withLock {
            $0.statistics.datagramsIn += datagramsIn
            $0.statistics.datagramsOut += datagramsOut
        }
    }

    /// Asks every relay's `/readyz` each interval (a slow relay delays the others' poll, as with a balancer's
    /// health checker: each answer is bounded by a 1 s timeout).
    private func pollReadiness() {
        var first = true
        while !stopped {
            let started = ContinuousClock.now
            let answers = backends.map { AdminHTTPClient.get($0.admin, "/readyz")?.status == 200 }
            let now = ContinuousClock.now
            state.withLock { state in
                for (index, ready) in answers.enumerated() where first || state.ready[index] != ready {
                    state.ready[index] = ready
                    state.statistics.changes.append(.init(backend: index, ready: ready, at: now))
                }
            }
            first = false
            let next = started + pollInterval
            let wait = next - ContinuousClock.now
            if wait > .zero {
                Thread.sleep(
                    forTimeInterval: Double(wait.components.seconds) + Double(wait.components.attoseconds) / 1e18)
            }
        }
    }
}
