import ChildProcesses
import Foundation
import Glibc
import PTTTransport
import TestSupport
import Testing

/// A relay whose descriptors run out under a flood of TCP connections: `ptt-transport serve` under `ulimit -n`,
/// so only the child's table fills. It must keep running without spinning on the listener it cannot accept
/// from, keep serving the connection it had, and serve a new client once descriptors are free again.
@Suite("Server out of descriptors: keeps running, serving, and recovers", .disabled(if: sanitizedBuild), .integration)
struct ServerDescriptorExhaustionTests {
    static let limit = 48

    @Test func aFloodThatExhaustsDescriptorsLeavesTheRelayServingAndItRecovers() async throws {
        let server = try await ChildServer.start(
            "/bin/bash",
            [
                "-c", "ulimit -n \(Self.limit) && exec \"$0\" \"$@\"", Subprocess.cli, "serve", "--no-udp",
                "--tcp-listen", "127.0.0.1:0", "--cert", Fixtures.serverCert, "--key", Fixtures.serverKey,
            ])
        defer { server.kill() }
        let pid = server.processIdentifier  // bash exec'd the relay: same process
        let address = try #require(ServerAddress(server.address))
        try await withTimeout(.seconds(120)) {
            try await Self.floodAndRecover(server, pid: pid, address: address)
        }
    }

    static func floodAndRecover(_ server: ChildServer, pid: Int32, address: ServerAddress) async throws {
        let client = TCPFallbackTests.client(.tcpOnly)
        // An established connection before the flood.
        let established = try await client.connect(to: address)
        let stream = try await established.openStream()
        var replies = stream.messages.makeAsyncIterator()
        try await stream.send(Array("before".utf8))
        #expect(try await replies.next()?.bytes == Array("before".utf8))

        // Twice as many silent connections as the relay has descriptors, from four sources (each under its
        // pending budget), so the descriptor limit is what stops the relay.
        let attacker = SilentTCP()
        for source in 2...5 { attacker.open(Self.limit / 2, port: address.port, from: "127.0.0.\(source)") }
        let full = Self.limit - 8
        let inUse = await Self.descriptors(of: pid, reach: full)
        #expect(inUse >= full, "the flood filled the relay's descriptor table (\(inUse) of \(Self.limit))")

        // Only the reserve left: newcomers are reset at accept, and the established connection is still served.
        let refused = await attacker.waitForClosed(within: .seconds(10)) { $0.count >= Self.limit }
        #expect(refused.count >= Self.limit, "connections beyond the table were reset at accept: \(refused.count)")
        try await stream.send(Array("reserve".utf8))
        #expect(try await replies.next()?.bytes == Array("reserve".utf8))

        // Truly out of descriptors (the soft limit lowered under what is open, so accept fails with EMFILE) with
        // connections queued: the listener stays readable, and the relay must not spin on it.
        #expect(try await Self.setDescriptorLimit(of: pid, to: Self.limit / 2))
        attacker.open(8, port: address.port, from: "127.0.0.6")
        let busy = await Self.cpuShare(of: pid, over: .seconds(2))
        #expect(busy < 0.3, "the relay used \(Int(busy * 100)) % of a CPU while out of descriptors")
        #expect(server.isRunning, "the relay is still running")
        try await stream.send(Array("emfile".utf8))
        #expect(try await replies.next()?.bytes == Array("emfile".utf8))
        #expect(try await Self.setDescriptorLimit(of: pid, to: Self.limit))

        // Descriptors freed: the attackers leave (the relay sees their EOFs and closes its ends), and a new
        // client is served. Until the relay has closed them, a newcomer would still land in the reserve.
        attacker.closeAll()
        let freed = await Self.descriptors(of: pid, fallTo: Self.limit / 2)
        #expect(freed <= Self.limit / 2, "the relay released the attackers' descriptors (\(freed) still open)")
        try await TCPBadInputTests.expectGoodConnection(client, to: address)
        try await stream.send(Array("after".utf8))
        #expect(try await replies.next()?.bytes == Array("after".utf8))
        try await stream.finish()
        await established.close()
        #expect(server.isRunning, "the relay is still running")
    }

    /// Sets the soft RLIMIT_NOFILE of our child `pid` (its hard limit stays at `limit`) with util-linux's
    /// prlimit(1): Glibc's prlimit(2) wrapper is not visible to Swift.
    static func setDescriptorLimit(of pid: Int32, to soft: Int) async throws -> Bool {
        let result = try await runProgram(
            "/usr/bin/prlimit", ["--pid", "\(pid)", "--nofile=\(soft):\(Self.limit)"])
        return result.status == 0 && !result.signaled
    }

    /// The number of open descriptors of `pid`, once it reaches `target` (bounded wait) or the last one seen.
    static func descriptors(of pid: Int32, reach target: Int) async -> Int {
        var count = 0
        for _ in 0..<250 {
            count = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? 0
            if count >= target { return count }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return count
    }

    /// The number of open descriptors of `pid`, once it falls to `target` (bounded wait: 30 s, for a loaded
    /// machine where the relay takes a while to read every EOF) or the last one seen.
    static func descriptors(of pid: Int32, fallTo target: Int) async -> Int {
        var count = Int.max
        for _ in 0..<1500 {
            count = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? 0
            if count <= target { return count }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return count
    }

    /// CPU time `pid` used over `window` (user + system, all threads), as a share of one CPU.
    static func cpuShare(of pid: Int32, over window: Duration) async -> Double {
        func ticks() -> Double {
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                let end = stat.lastIndex(of: ")")
            else { return 0 }
            // After "pid (comm) ": state is field 3; utime and stime are fields 14 and 15.
            let fields = stat[stat.index(after: end)...].split(separator: " ")
            guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
            return user + system
        }
        let clock = ContinuousClock()
        let start = clock.now
        let before = ticks()
        try? await Task.sleep(for: window)
        let elapsed = clock.now - start
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
        return (ticks() - before) / Double(sysconf(Int32(_SC_CLK_TCK))) / seconds
    }
}
