internal import CNetworkEmulation
import Foundation
import Glibc
import TransportCore
import TransportIO

/// Two network namespaces (client 198.18.0.1, server 198.18.0.2) joined by TUN devices and a userspace delay line:
/// an emulated path with a chosen RTT and loss, on this machine only (this kernel has no netem). Needs root.
///
/// Event loops started inside `withNamespace` open every socket on that side of the path; their threads themselves
/// go back to the caller's namespace, so no other thread (the concurrency runtime's workers, which a loop thread
/// may start when it resumes a task) ever lands in an emulated network. `close()` (also run at process exit) deletes the namespaces.
package final class EmulatedNetwork: @unchecked Sendable {
    // @unchecked Sendable invariant: `line` and `control` are locked (`capturing` under `line`'s lock); the rest
    // is immutable after init.
    package enum Side: Sendable { case client, server }

    package static let clientAddress = "198.18.0.1"
    package static let serverAddress = "198.18.0.2"
    /// The client's IPv6 address when the network was created with `ipv6: true` (a /64 of the ULA range).
    package static let clientAddress6 = "fd00:198:18::1"
    /// The server's IPv6 address when the network was created with `ipv6: true`.
    package static let serverAddress6 = "fd00:198:18::2"
    package let clientNamespace: String
    package let serverNamespace: String
    private let clientTUN: Int32
    private let serverTUN: Int32
    private let line: Locked<DelayLine>
    /// Guarded by `line`'s lock.
    private var capturing: PacketCapture?
    /// Guarded by `line`'s lock; nil until `recordTimeline()`.
    private var timeline: PathTimeline?
    private let control = Locked((stop: false, closed: false))
    private var pump: pthread_t?
    private static let serial = Locked(0)

    /// Whether emulation can run here, or why not.
    package static func availability() -> String? {
        if geteuid() != 0 { return "emulated paths need root (network namespaces and TUN devices)" }
        if access("/dev/net/tun", R_OK | W_OK) != 0 { return "/dev/net/tun is not available" }
        if access("/usr/sbin/ip", X_OK) != 0 && access("/sbin/ip", X_OK) != 0 {
            return "the ip command (iproute2) is missing"
        }
        return nil
    }

    /// - Parameter serverTCPFastOpen: enable TCP Fast Open for listeners in the server namespace (sysctl
    ///   `net.ipv4.tcp_fastopen=3`, as a relay host would be configured); the client namespace keeps the kernel
    ///   default (client side on).
    /// - Parameter ipv6: also give both sides an IPv6 address (`clientAddress6`, `serverAddress6`).
    package static func create(
        rttMilliseconds: Double, loss: Double, seed: UInt64 = 1,
        serverTCPFastOpen: Bool = false, ipv6: Bool = false
    ) throws(TransportError) -> EmulatedNetwork {
        if let reason = availability() { throw TransportError(.invalidConfiguration, reason) }
        removeNamespacesOfExitedProcesses()  // not removeStaleNamespaces(): other live benchmarks keep theirs
        let number = serial.withLock { value in
            value += 1
            return value
        }
        let base = "ptt-bench-\(getpid())-\(number)"  // unique per network
        let names = (client: base + "-c", server: base + "-s")
        try ip(["netns", "add", names.client])
        try ip(["netns", "add", names.server])
        do throws(TransportError) {
            let clientTUN = try openTUN(in: names.client, address: clientAddress, address6: ipv6 ? clientAddress6 : nil)
            let serverTUN = try openTUN(in: names.server, address: serverAddress, address6: ipv6 ? serverAddress6 : nil)
            if serverTCPFastOpen {
                _ = try ip(["netns", "exec", names.server, "sh", "-c", "echo 3 > /proc/sys/net/ipv4/tcp_fastopen"])
            }
            let oneWay = UInt64(max(0, rttMilliseconds) * 500_000)  // half the RTT, in ns
            let network = EmulatedNetwork(
                names: names, clientTUN: clientTUN, serverTUN: serverTUN,
                line: DelayLine(oneWayDelay: oneWay, lossRate: loss, seed: seed))
            try network.startPump()
            Cleanup.register(network)
            return network
        } catch {
            _ = try? ip(["netns", "del", names.client])
            _ = try? ip(["netns", "del", names.server])
            throw error
        }
    }

    private init(names: (client: String, server: String), clientTUN: Int32, serverTUN: Int32, line: DelayLine) {
        clientNamespace = names.client
        serverNamespace = names.server
        self.clientTUN = clientTUN
        self.serverTUN = serverTUN
        self.line = Locked(line)
    }

    deinit { close() }

    /// Silently drop every UDP packet (emulates a network that blocks UDP).
    package var dropUDP: Bool {
        get { line.withLock { $0.dropUDP } }
        set { line.withLock { $0.dropUDP = newValue } }
    }

    /// Applies `impairments` to the packets that enter from now on; their schedules count from now.
    package func impair(_ impairments: Impairments) {
        line.withLock { $0.impair(impairments, at: MonotonicClock.now()) }
    }

    /// The delay line's counters so far: the path's wire-level evidence.
    package var counters: DelayLineCounters { line.withLock { $0.counters } }

    /// Records every packet that enters the path from now on into a pcap file at `path` (see `PacketCapture`).
    package func capture(to path: String) throws(TransportError) {
        let capture = try PacketCapture(path: path)
        line.withLock { _ in self.capturing = capture }
    }

    /// Records when each UDP packet enters and leaves the path from now on (see `PathTimeline`).
    package func recordTimeline() {
        line.withLock { _ in self.timeline = PathTimeline() }
    }

    /// The timeline recorded so far (empty when not recording).
    package var recordedTimeline: PathTimeline { line.withLock { _ in self.timeline ?? PathTimeline() } }

    /// The cleartext QUIC long headers that crossed the path so far.
    package var wire: QUICWireTally { line.withLock { $0.wire } }

    /// Runs `body` on the calling thread moved into `side`'s namespace, then moves it back.
    package func withNamespace<T>(_ side: Side, _ body: () throws -> T) throws -> T {
        try Self.withNamespace(named: side == .client ? clientNamespace : serverNamespace, body)
    }

    /// Runs `body` on the calling thread moved into the named namespace (`ip netns add NAME`), then moves it back.
    package static func withNamespace<T>(named name: String, _ body: () throws -> T) throws -> T {
        NamespaceHooks.install()
        let saved = ptt_netns_enter("/var/run/netns/" + name)
        guard saved >= 0 else {
            throw TransportError(
                .systemCallFailed, "setns failed: \(errnoDescription(-saved))", libraryCode: Int(-saved))
        }
        defer {
            let restored = ptt_netns_restore(saved)
            if restored != 0 { fatalError("cannot leave namespace: \(errnoDescription(-restored))") }
        }
        return try body()
    }

    /// Stops the pump, closes the TUN devices and deletes the namespaces. Idempotent.
    package func close() {
        let first = control.withLock { state -> Bool in
            defer {
                state.stop = true
                state.closed = true
            }
            return !state.closed
        }
        guard first else { return }
        if let pump { pthread_join(pump, nil) }
        Glibc.close(clientTUN)
        Glibc.close(serverTUN)
        _ = try? Self.ip(["netns", "del", clientNamespace])
        _ = try? Self.ip(["netns", "del", serverNamespace])
    }

    /// Deletes namespaces left by a benchmark that was killed.
    package static func removeStaleNamespaces() {
        let listing = (try? ip(["netns", "list"])) ?? ""
        for line in listing.split(separator: "\n") {
            let name = String(line.split(separator: " ").first ?? "")
            if name.hasPrefix("ptt-bench-") { _ = try? ip(["netns", "del", name]) }
        }
    }

    // MARK: - Set-up

    /// Opens a TUN device in `namespace` with `address`/24 (and `address6`/64 when given), up; returns its
    /// descriptor (nothing reads it unless the caller does: the kernel queues, then drops, what is routed to it).
    package static func openTUN(
        in namespace: String, address: String, address6: String? = nil
    ) throws(TransportError) -> Int32 {
        let saved = ptt_netns_enter("/var/run/netns/\(namespace)")
        guard saved >= 0 else {
            throw TransportError(
                .systemCallFailed, "setns failed: \(errnoDescription(-saved))", libraryCode: Int(-saved))
        }
        var name = [CChar](repeating: 0, count: 32)
        let fd = ptt_tun_open(&name, name.count)
        _ = ptt_netns_restore(saved)
        guard fd >= 0 else {
            throw TransportError(
                .systemCallFailed, "opening a TUN device failed: \(errnoDescription(-fd))",
                libraryCode: Int(-fd))
        }
        let device = String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        do throws(TransportError) {
            try ip(["-n", namespace, "link", "set", "lo", "up"])
            try ip(["-n", namespace, "addr", "add", "\(address)/24", "dev", device])
            if let address6 {
                try ip(["-n", namespace, "-6", "addr", "add", "\(address6)/64", "dev", device, "nodad"])
            }
            try ip(["-n", namespace, "link", "set", device, "up"])
        } catch {
            Glibc.close(fd)
            throw error
        }
        return fd
    }

    /// Runs the `ip` command (iproute2) with `arguments`; returns its output, throws with it on failure.
    @discardableResult
    package static func ip(_ arguments: [String]) throws(TransportError) -> String {
        try HelperCommand.succeed(ipCommandPath ?? "/usr/sbin/ip", arguments)
    }

    // MARK: - The pump

    private func startPump() throws(TransportError) {
        var thread = pthread_t()
        let context = Unmanaged.passRetained(self).toOpaque()  // released when the pump exits
        let rv = pthread_create(
            &thread, nil,
            { context in
                let network = Unmanaged<EmulatedNetwork>.fromOpaque(context!).takeRetainedValue()
                network.runPump()
                return nil
            }, context)
        guard rv == 0 else {
            Unmanaged<EmulatedNetwork>.fromOpaque(context).release()
            throw TransportError(.systemCallFailed, "pthread_create failed: \(errnoDescription(rv))")
        }
        pump = thread
    }

    private func runPump() {
        var buffer = [UInt8](repeating: 0, count: 65536)
        var fds = [
            pollfd(fd: clientTUN, events: Int16(POLLIN), revents: 0),
            pollfd(fd: serverTUN, events: Int16(POLLIN), revents: 0),
        ]
        while true {
            if control.withLock({ $0.stop }) { return }
            var now = MonotonicClock.now()
            let released = line.withLock { $0.due(now: now) }
            for (direction, packet) in released {
                let fd = direction == .clientToServer ? serverTUN : clientTUN
                _ = packet.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            }
            if !released.isEmpty {
                let written = MonotonicClock.now()
                line.withLock { _ in
                    for (direction, packet) in released {
                        timeline?.record(packet, direction: direction, entered: false, now: written)
                    }
                }
            }
            now = MonotonicClock.now()
            let remaining = line.withLock { $0.nextDeadline }.map { $0 > now ? $0 - now : 0 } ?? 20_000_000
            if remaining < 1_000_000 {
                if remaining > 0 { usleep(UInt32(remaining / 1000)) }
                fds[0].revents = 0
                fds[1].revents = 0
                _ = poll(&fds, 2, 0)
            } else {
                _ = poll(&fds, 2, Int32(min(remaining / 1_000_000, 20)))
            }
            // A dropUDP or impairment change made while poll slept applies to the packets read now.
            for (index, fd) in [clientTUN, serverTUN].enumerated() where fds[index].revents & Int16(POLLIN) != 0 {
                while true {
                    let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                    if n <= 0 { break }
                    let packet = Array(buffer.prefix(n))
                    let direction: DelayLine.Direction = index == 0 ? .clientToServer : .serverToClient
                    line.withLock {
                        capturing?.record(packet)
                        let now = MonotonicClock.now()
                        timeline?.record(packet, direction: direction, entered: true, now: now)
                        $0.enqueue(packet, direction: direction, now: now)
                    }
                }
            }
        }
    }
}

/// Deletes emulated networks when the process exits (including `exit(0)` from the CLI's SIGINT handler).
private enum Cleanup {
    nonisolated(unsafe) static var networks: [EmulatedNetwork] = []
    // nonisolated(unsafe) invariant: guarded by `lock`.
    static let lock = Locked(false)

    static func register(_ network: EmulatedNetwork) {
        lock.withLock { installed in
            networks.append(network)
            if !installed {
                installed = true
                atexit { Cleanup.lock.withLock { _ in for network in Cleanup.networks { network.close() } } }
            }
        }
    }
}
