internal import CNetworkEmulation
import Foundation
import Glibc
import TransportCore
import TransportIO

/// The emulator's probing, convenience and interrupt-cleanup API, on top of `EmulatedNetwork` (defined, with the
/// namespaces, TUN devices and the pump thread, in EmulatedNetwork.swift).
///
/// Layout of an emulated path:
///
///     netns <client ns>                                            netns <server ns>
///     198.18.0.1/24 on tunX ──read──► DelayLine (pump thread) ──write──► tunY 198.18.0.2/24
///                           ◄─write──                          ◄─read───
///
/// Each TUN device is opened (IFF_TUN | IFF_NO_PI) by a thread that has `setns`-ed into its namespace and then
/// moved back, so the process holds both devices while its own threads stay in the original namespace.
extension EmulatedNetwork {
    /// The client side's address, 198.18.0.1 (the benchmark range, RFC 2544), inside `clientNamespace`.
    package var clientAddress: String { Self.clientAddress }
    /// The server side's address, 198.18.0.2, inside `serverNamespace`.
    package var serverAddress: String { Self.serverAddress }

    /// An emulated path with round-trip time `rtt` (each direction delays by rtt / 2), seeded loss `loss` (0...1,
    /// applied independently in each direction) and the loss generator seeded by `seed`.
    package static func create(rtt: Duration, loss: Double = 0, seed: UInt64 = 1) throws -> EmulatedNetwork {
        let (seconds, attoseconds) = rtt.components
        let milliseconds = Double(seconds) * 1_000 + Double(attoseconds) / 1_000_000_000_000_000
        return try create(rttMilliseconds: milliseconds, loss: loss, seed: seed)
    }

    /// Whether emulated paths can run here: root (CAP_NET_ADMIN), the `ip` command, /dev/net/tun openable, and a
    /// probe namespace (`ptt-bench-<pid>-probe`) that can be added, entered, given a TUN device and deleted.
    /// Returns `(true, summary)` or `(false, the first reason it cannot)`. Probed once per process (callers on
    /// several threads would otherwise race on the probe's name).
    package static func isAvailable() -> (Bool, String) { probeResult }

    private static let probeResult: (Bool, String) = probe()

    private static func probe() -> (Bool, String) {
        if geteuid() != 0 {
            return (false, "not root (euid \(geteuid())): network namespaces and TUN devices need root")
        }
        guard let ip = ipCommandPath else {
            return (false, "the ip command (iproute2) is missing: apt-get install iproute2")
        }
        let tun = open("/dev/net/tun", O_RDWR | O_CLOEXEC)
        if tun < 0 {
            let code = errno
            let hint = code == ENOENT ? " (no TUN device node: modprobe tun, or give the container /dev/net/tun)" : ""
            return (false, "cannot open /dev/net/tun: \(errnoDescription(code))\(hint)")
        }
        Glibc.close(tun)
        let probe = "ptt-bench-\(getpid())-probe"
        _ = try? HelperCommand.succeed(ip, ["netns", "del", probe])
        do {
            try HelperCommand.succeed(ip, ["netns", "add", probe])
        } catch {
            return (false, "ip netns add failed: \(error)")
        }
        defer { _ = try? HelperCommand.succeed(ip, ["netns", "del", probe]) }
        let saved = ptt_netns_enter("/var/run/netns/\(probe)")
        if saved < 0 { return (false, "setns into a new namespace failed: \(errnoDescription(-saved))") }
        var name = [CChar](repeating: 0, count: 32)
        let fd = ptt_tun_open(&name, name.count)
        let restored = ptt_netns_restore(saved)
        if fd >= 0 { Glibc.close(fd) }
        if restored < 0 {
            // The calling thread is stuck in the probe namespace; nothing sensible can run on it.
            fatalError("cannot return to the original network namespace: \(errnoDescription(-restored))")
        }
        if fd < 0 { return (false, "creating a TUN device in a namespace failed: \(errnoDescription(-fd))") }
        return (true, "root, /dev/net/tun, ip netns and TUN devices inside namespaces work")
    }

    /// Deletes `ptt-bench-<pid>-*` namespaces whose process `<pid>` no longer exists (a benchmark killed with
    /// SIGKILL, or a crash), leaving those of running processes alone. Returns the names deleted.
    /// (`removeStaleNamespaces()` deletes every `ptt-bench-*` namespace, including live ones.)
    @discardableResult
    package static func removeNamespacesOfExitedProcesses() -> [String] {
        guard let ip = ipCommandPath, let listing = try? HelperCommand.succeed(ip, ["netns", "list"]) else { return [] }
        var deleted: [String] = []
        for line in listing.split(separator: "\n") {
            let name = String(line.split(separator: " ").first ?? "")
            guard name.hasPrefix("ptt-bench-") else { continue }
            let owner = name.dropFirst("ptt-bench-".count).prefix { $0.isNumber }
            if let pid = pid_t(owner), kill(pid, 0) == 0 || errno == EPERM { continue }  // owner alive
            if (try? HelperCommand.succeed(ip, ["netns", "del", name])) != nil { deleted.append(name) }
        }
        return deleted
    }

    /// Deletes this process's `ptt-bench-<pid>-*` namespaces on SIGINT and SIGTERM, then lets the signal take its
    /// default action (the process ends as it would have). Networks that are still open are closed by the exit
    /// handler the first `create` registers when a host calls `exit` itself — `ptt-transport`'s own SIGINT
    /// handler does — so call this only from hosts that do not handle those signals. Idempotent.
    package static func installInterruptCleanup() {
        InterruptCleanup.install()
    }

    /// The names of this process's emulator namespaces currently present.
    package static func namespacesOfThisProcess() -> [String] {
        guard let ip = ipCommandPath, let listing = try? HelperCommand.succeed(ip, ["netns", "list"]) else { return [] }
        let prefix = "ptt-bench-\(getpid())-"
        return listing.split(separator: "\n").map { String($0.split(separator: " ").first ?? "") }
            .filter { $0.hasPrefix(prefix) }
    }

    static var ipCommandPath: String? {
        ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"].first { access($0, X_OK) == 0 }
    }
}

/// SIGINT/SIGTERM → delete this process's namespaces → default action of the signal.
private enum InterruptCleanup {
    private static let sources = Locked<[DispatchSourceSignal]>([])

    static func install() {
        sources.withLock { sources in
            guard sources.isEmpty else { return }
            for signalNumber in [SIGINT, SIGTERM] {
                signal(signalNumber, SIG_IGN)  // delivered to the dispatch source instead
                let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
                source.setEventHandler {
                    if let ip = EmulatedNetwork.ipCommandPath {
                        for name in EmulatedNetwork.namespacesOfThisProcess() {
                            _ = try? HelperCommand.succeed(ip, ["netns", "del", name])
                        }
                    }
                    signal(signalNumber, SIG_DFL)
                    // Process-directed: dispatch threads block signals, so raise() would not land.
                    kill(getpid(), signalNumber)
                }
                source.resume()
                sources.append(source)
            }
        }
    }
}
