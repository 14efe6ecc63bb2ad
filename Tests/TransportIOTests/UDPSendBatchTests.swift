import Foundation
import Glibc
import NetworkEmulation
import Testing
import TransportCore

@testable import TransportIO

/// The send batch on real sockets: GSO runs arrive as separate datagrams of the right sizes, one batch serves
/// several destinations and ECN codepoints, a packet the kernel refuses is dropped alone, and a burst far larger
/// than the socket buffer loses nothing (EAGAIN keeps the tail, writers wait for room).
@Suite("UDP send batch (sendmmsg, GSO)", .serialized)
struct UDPSendBatchTests {
    /// One packet the test expects: who gets it, its size, its ECN codepoint.
    struct Expected: Equatable {
        var receiver: Int
        var length: Int
        var ecn: UInt32
    }

    @Test func equalSizePacketsToOneDestinationArriveAsSeparateDatagrams() throws {
        let loop = try EventLoop(name: "batch-gso")
        defer { loop.shutdown() }
        let receiver = try UDPSocket(bindingTo: SocketAddress(host: "127.0.0.1", port: 0)!)
        let sizes = Array(repeating: 1_200, count: 20) + [700] + Array(repeating: 900, count: 5)
        let plan = sizes.map { Expected(receiver: 0, length: $0, ecn: 2) }
        let sending = try Self.send(plan, to: [receiver.localAddress], on: loop)
        let received = Self.receiveAll([receiver], count: plan.count)
        let statistics = try #require(try Self.wait(for: sending))
        #expect(received.map(\.packet) == plan)
        #expect(received.map(\.sequence) == Array(0..<plan.count), "in order")
        #expect(statistics.packetsSent == UInt64(plan.count) && statistics.dropped == 0)
        if statistics.gsoEnabled {
            #expect(statistics.gsoMessages >= 2, "the run of 21 and the run of 5 each went as one GSO message")
        }
        #expect(statistics.syscalls == 1, "one turn, one sendmmsg")
    }

    @Test func oneBatchServesSeveralDestinationsAndECNCodepointsAndDropsOnlyTheOversizedPacket() throws {
        let loop = try EventLoop(name: "batch-mixed")
        defer { loop.shutdown() }
        let receivers = try (0..<3).map { _ in try UDPSocket(bindingTo: SocketAddress(host: "127.0.0.1", port: 0)!) }
        var plan: [Expected] = []
        for index in 0..<60 {
            // Runs of equal sizes to one receiver, broken by a change of receiver, size or ECN.
            plan.append(
                Expected(receiver: (index / 4) % 3, length: 200 + (index / 8) * 100, ecn: UInt32(index / 5 % 3)))
        }
        let oversized = Expected(receiver: 1, length: 65_508, ecn: 0)  // above IPv4's largest UDP payload
        plan.insert(oversized, at: 30)
        let sending = try Self.send(plan, to: receivers.map(\.localAddress), on: loop)
        let delivered = plan.enumerated().filter { $0.element != oversized }
        let received = Self.receiveAll(receivers, count: delivered.count)
        let statistics = try #require(try Self.wait(for: sending))
        let bySequence = received.sorted { $0.sequence < $1.sequence }
        #expect(bySequence.map(\.sequence) == delivered.map(\.offset), "every packet but the oversized one, once")
        #expect(bySequence.map(\.packet) == delivered.map(\.element), "to its receiver, with its size and ECN")
        for index in receivers.indices {
            let sequences = received.filter { $0.packet.receiver == index }.map(\.sequence)
            #expect(sequences == sequences.sorted(), "receiver \(index) got its packets in order")
        }
        #expect(statistics.dropped == 1 && statistics.lastError == EMSGSIZE)
        #expect(statistics.packetsSent == UInt64(delivered.count))
    }

    @Test(
        .enabled(
            if: ThrottledNamespace.availability == nil,
            Comment(rawValue: ThrottledNamespace.availability ?? "")))
    func aBurstFarLargerThanTheSocketBufferLosesNoPacket() async throws {
        // Loopback hands each packet to its receiver at once, so a full socket buffer needs a slow queue: a
        // private namespace whose loopback is shaped by tbf holds packets (charged to the sender's tiny buffer).
        let namespace = try ThrottledNamespace()
        defer { namespace.remove() }
        let (sender, receiver) = try namespace.inside {
            let sender = try UDPSocket(bindingTo: SocketAddress(host: "127.0.0.1", port: 0)!)
            var size: Int32 = 4_096
            setsockopt(sender.fd, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
            return (sender, try UDPSocket(bindingTo: SocketAddress(host: "127.0.0.1", port: 0)!))
        }
        let loop = try EventLoop(name: "batch-eagain")
        defer { loop.shutdown() }
        // Loopback queues each packet to the backlog of the CPU that dequeued it from tbf; with the qdisc run from
        // two CPUs (the sender's thread on one, tbf's watchdog on the other) the two backlogs race and the kernel
        // itself reorders (seen at load average 15: …1693, 1697, 1694…). The sender's thread on one CPU keeps every
        // dequeue there: the watchdog timer is pinned to the CPU that armed it, so the order checked below is ours.
        #expect(await loop.pin(toCPU: 0), "the sender's loop stays on one CPU")
        let total = 3_000
        let plan = (0..<total).map { Expected(receiver: 0, length: 1_200 + ($0 % 7 == 0 ? 0 : -$0 % 3), ecn: 0) }
        let sending = try Self.send(plan, to: [receiver.localAddress], on: loop, from: sender)
        let received = Self.receiveAll([receiver], count: total, timeoutMilliseconds: 5_000)
        let final = try #require(try Self.wait(for: sending))
        #expect(received.count == total, "every packet of the burst arrived")
        #expect(received.map(\.sequence) == Array(0..<received.count), "in order, none twice")
        #expect(received.map(\.packet) == Array(plan.prefix(received.count)))
        #expect(final.wouldBlock > 0, "the burst outran the socket buffer (EAGAIN happened)")
        #expect(final.dropped == 0 && final.packetsSent == UInt64(total))
    }

    // MARK: - Helpers

    /// Starts sending `plan` (packet i carries its index in its first 4 bytes) from a new batch on `loop`, writing
    /// as fast as the batch has room; the batch's counters land in the result once everything left.
    static func send(
        _ plan: [Expected], to destinations: [SocketAddress], on loop: EventLoop, from socket: UDPSocket? = nil
    ) throws -> Locked<Result<UDPSendBatch.Statistics, any Error>?> {
        let transfer = UnsafeTransfer(try socket ?? UDPSocket(bindingTo: SocketAddress(host: "127.0.0.1", port: 0)!))
        let outcome = Locked<Result<UDPSendBatch.Statistics, any Error>?>(nil)
        loop.execute {
            do {
                let producer = try BurstProducer(
                    socket: transfer.value, loop: loop, plan: plan, destinations: destinations
                ) { statistics in outcome.withLock { $0 = .success(statistics) } }
                producer.run()
            } catch {
                outcome.withLock { $0 = .failure(error) }
            }
        }
        return outcome
    }

    /// The sender's counters once it finished (nil after 10 s).
    static func wait(
        for outcome: Locked<Result<UDPSendBatch.Statistics, any Error>?>
    ) throws -> UDPSendBatch.Statistics? {
        for _ in 0..<1_000 {
            if let result = outcome.withLock({ $0 }) { return try result.get() }
            usleep(10_000)
        }
        return nil
    }

    /// Receives until `count` datagrams arrived (or nothing came for a while); each as (sequence, packet).
    static func receiveAll(
        _ sockets: [UDPSocket], count: Int, timeoutMilliseconds: Int32 = 3_000
    ) -> [(sequence: Int, packet: Expected)] {
        var result: [(sequence: Int, packet: Expected)] = []
        var buffer = [UInt8](repeating: 0, count: 70_000)
        var polls = sockets.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
        while result.count < count, poll(&polls, nfds_t(polls.count), timeoutMilliseconds) > 0 {
            for (index, socket) in sockets.enumerated() {
                while let datagram = buffer.withUnsafeMutableBytes({ try? socket.receive(into: $0) }) {
                    let sequence = buffer.withUnsafeBytes { Int($0.loadUnaligned(as: UInt32.self)) }
                    result.append((sequence, Expected(receiver: index, length: datagram.length, ecn: datagram.ecn)))
                }
            }
        }
        return result
    }
}

/// Writes a test plan into a send batch on its loop, pausing whenever the batch has no room.
private final class BurstProducer {
    let batch: UDPSendBatch
    let plan: [UDPSendBatchTests.Expected]
    let destinations: [SocketAddress]
    let done: (UDPSendBatch.Statistics) -> Void
    var next = 0

    init(
        socket: UDPSocket, loop: EventLoop, plan: [UDPSendBatchTests.Expected], destinations: [SocketAddress],
        done: @escaping (UDPSendBatch.Statistics) -> Void
    ) throws {
        let batch = try UDPSendBatch(socket: socket, loop: loop, ownerEvents: 0)
        try loop.register(fd: socket.fd, events: 0) { ready in
            if ready & EventLoop.writable != 0 { batch.socketWritable() }
        }
        self.batch = batch
        self.plan = plan
        self.destinations = destinations
        self.done = done
    }

    func run() {
        while next < plan.count {
            let packet = plan[next]
            let sequence = UInt32(next)
            let written = batch.write(capacity: packet.length, from: nil) { buffer in
                buffer.initializeMemory(as: UInt8.self, repeating: 0x5a)
                buffer.storeBytes(of: sequence, as: UInt32.self)
                return (packet.length, packet.ecn, destinations[packet.receiver])
            }
            guard written != nil else {
                batch.whenRoom { [self] in run() }
                return
            }
            next += 1
        }
        waitUntilSent()
    }

    private func waitUntilSent() {
        batch.flush()
        if batch.queuedPackets == 0 {
            batch.loop.unregister(fd: batch.socket.fd)
            done(batch.statistics)
        } else {
            batch.whenRoom { [self] in waitUntilSent() }
        }
    }
}

/// A private network namespace whose loopback is rate-limited (tbf), so a UDP sender's buffer really fills.
struct ThrottledNamespace {
    let name = "ptt-batch-\(getpid())"

    /// nil when it can run here, or why not.
    static let availability: String? = {
        if geteuid() != 0 { return "needs root (network namespaces and tc)" }
        if access("/usr/sbin/ip", X_OK) != 0 || access("/usr/sbin/tc", X_OK) != 0 { return "ip or tc is missing" }
        return nil
    }()

    init() throws {
        try Self.run("/usr/sbin/ip", ["netns", "add", name])
        try Self.run("/usr/sbin/ip", ["netns", "exec", name, "ip", "link", "set", "lo", "up"])
        try Self.run(
            "/usr/sbin/ip",
            [
                "netns", "exec", name, "tc", "qdisc", "add", "dev", "lo", "root", "tbf", "rate", "100mbit", "burst",
                "64kb", "limit", "16mb",
            ])
    }

    /// Runs `body` on the calling thread inside the namespace (sockets it opens stay there).
    func inside<T>(_ body: () throws -> T) throws -> T {
        try EmulatedNetwork.withNamespace(named: name, body)
    }

    func remove() { try? Self.run("/usr/sbin/ip", ["netns", "del", name]) }

    private static func run(_ path: String, _ arguments: [String]) throws {
        try HelperCommand.succeed(path, arguments)
    }
}
