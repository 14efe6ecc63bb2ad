import Foundation
import NetworkEmulation
import PTTTalkGroups
import PTTTransport
import TransportIO

/// capacity-fanout: one talker sends 50 frames/s of 80-byte audio through a `FanoutRelay` to K listeners; K climbs
/// a ladder until a step loses 1 % or more of its frame deliveries or its p99 latency reaches 5 ms. The relay, the
/// talker and the listeners each run on their own event loop in this process; latency is the talker's monotonic
/// send time (in the frame) to the listener's receive time.
enum FanoutScenario {
    static let framesPerSecond = 50
    /// After the last frame of a step, how long late frames may still arrive (forwarded frames expire after 100 ms).
    static let grace = Duration.milliseconds(300)
    /// The relay's CPU per forwarded copy may cost at most this multiple of the kernel floor.
    static let cpuOverFloorTarget = 1.25

    static func run(_ result: inout ScenarioResult, options: BenchOptions, environment: BenchEnvironment) async throws {
        if let rtt = environment.rttMilliseconds {
            result.note =
                "runs on loopback only: on the emulated \(BenchReport.format(rtt)) ms path the one-way "
                + "delay alone exceeds the 5 ms latency criterion; run without --rtt/--loss"
            return
        }
        let quick = options.iterations < 10
        var ladder = FanoutLadder(counts: options.fanoutListeners ?? (quick ? FanoutLadder.quick : FanoutLadder.full))
        let stepSeconds = quick ? 1 : 3
        let fileLimit = CapacityScenarios.raiseFileLimit(to: 30_000)
        let load = (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").first

        var serverConfiguration = ServerConfiguration(
            quic: nil, certificateChain: options.certificate,
            privateKey: options.privateKey)
        serverConfiguration.maxConnections = (ladder.counts.max() ?? 0) + 16
        serverConfiguration.idleTimeout = .seconds(120)
        if let loops = options.relayLoops { serverConfiguration.eventLoops = loops }
        options.progress("capacity-fanout: in-memory library floor")
        // Informative: without it (it failed) the steps lack the library-floor figures, nothing else.
        let libraryFloor = try? await FanoutFloor.measure(
            certificate: options.certificate, privateKey: options.privateKey, ca: options.certificateAuthority,
            listeners: quick ? 25 : FanoutFloor.listeners)
        let relayStatistics = FanoutStatistics()
        let (server, address, relay) = try await environment.startRelay(
            serverConfiguration,
            behaviour: .fanout(relayStatistics))
        // Every loop the relay runs (their thread CPU time is the relay's cost per copy).
        let relayLoops = server.loops
        let listenerLoop = try environment.makeClientSideLoop(name: "bench-listeners")
        let talkerLoop = try environment.makeClientSideLoop(name: "bench-talker")
        // Isolation: the relay's loop on CPU 0, the load generator's (talker, listeners) on CPU 1, so the kernel
        // never runs the relay's clients in the middle of its forwarding. The criterion judges the relay's own
        // forwarding latency; the end-to-end figures include the cross-CPU wake-ups this costs.
        var pinned = false
        if ProcessInfo.processInfo.activeProcessorCount >= 2 {
            let relayPinned = await server.loop.pin(toCPU: 0)
            let listenersPinned = await listenerLoop.pin(toCPU: 1)
            pinned = await talkerLoop.pin(toCPU: 1) && relayPinned && listenersPinned
        }
        let clientConfiguration = ClientConfiguration(
            serverName: "localhost", trust: .caFile(options.certificateAuthority), idleTimeout: .seconds(120),
            handshakeTimeout: .seconds(10))
        let listenerClient = TransportClient(configuration: clientConfiguration, loop: listenerLoop)
        let listeners = FanoutListeners()
        var connections: [TransportConnection] = []
        var readers: [Task<Void, Never>] = []
        var stopReason: String?
        var talker: TransportConnection?
        do {
            let speaker = try await TransportClient(configuration: clientConfiguration, loop: talkerLoop)
                .connect(to: address)
            talker = speaker
            var sequence: UInt32 = 0
            while let count = ladder.next {
                if count + 64 > fileLimit {
                    stopReason = "the file descriptor limit (\(fileLimit)) leaves no room for \(count) listeners"
                    break
                }
                do {
                    let added = try await connect(count - connections.count, with: listenerClient, to: address)
                    for connection in added { readers.append(Task { await listeners.listen(connection) }) }
                    connections += added
                } catch {
                    stopReason =
                        "stopped while connecting \(count) listeners (\(connections.count) connected): \(error)"
                    break
                }
                options.progress("capacity-fanout: \(count) listeners connected, warming up")
                let heard = try await warmUp(speaker, listeners: listeners, count: count, sequence: &sequence)
                let frames = stepSeconds * framesPerSecond
                let window = sequence..<(sequence &+ UInt32(frames))
                listeners.measure(window)
                _ = relayStatistics.take()
                let probe = connections.last
                let packetsBefore = await probe?.statistics()
                let cpuBefore = relayCPU(relayLoops)
                let sent = try await talk(speaker, frames: frames, sequence: &sequence)
                try await Task.sleep(for: grace)
                let cpuUsed = relayCPU(relayLoops) &- cpuBefore
                let snapshot = relayStatistics.take()
                let packetsAfter = await probe?.statistics()
                let relayLatencies = snapshot.forwardingLatencies.map(\.milliseconds)
                let (delivered, latencies) = listeners.collect()
                let relaySamples = Samples(relayLatencies)
                let endToEnd = Samples(latencies)
                var step = FanoutLadder.Step(
                    listeners: count, framesSent: sent, delivered: delivered, p50Milliseconds: relaySamples.p50,
                    p99Milliseconds: relaySamples.p99, endToEndP50Milliseconds: endToEnd.p50,
                    endToEndP99Milliseconds: endToEnd.p99)
                if snapshot.copiesQueued > 0 {
                    step.relayCPUMicrosecondsPerCopy = Double(cpuUsed) / Double(snapshot.copiesQueued) / 1_000
                }
                if let before = packetsBefore, let after = packetsAfter, after.packetsReceived > before.packetsReceived
                {
                    step.packetBytes = Int(
                        (after.bytesReceived - before.bytesReceived) / (after.packetsReceived - before.packetsReceived))
                }
                try await measureFloor(&step, pinned: pinned)
                step.libraryFloorMicrosecondsPerCopy = libraryFloor.map { $0.nanosecondsPerCopy / 1_000 }
                ladder.record(step)
                options.progress(
                    "capacity-fanout: \(count) listeners: loss \(BenchReport.format(step.lossPercent)) %, "
                        + "relay p50 \(BenchReport.format(step.p50Milliseconds)) ms, p99 \(BenchReport.format(step.p99Milliseconds)) ms; "
                        + "end to end p50 \(BenchReport.format(endToEnd.p50)) ms, p99 \(BenchReport.format(endToEnd.p99)) ms; "
                        + "relay CPU \(BenchReport.format(step.relayCPUMicrosecondsPerCopy)) µs/copy, floor "
                        + "\(BenchReport.format(step.floorMicrosecondsPerPacket)) µs/packet (send only "
                        + "\(BenchReport.format(step.sendOnlyFloorMicrosecondsPerPacket))), library floor "
                        + "\(BenchReport.format(step.libraryFloorMicrosecondsPerCopy)) µs/copy"
                        + (heard < count ? " (only \(heard) listeners heard the warm-up)" : ""))
            }
        } catch {
            stopReason = "stopped by an error: \(error)"
        }
        await talker?.close()
        for connection in connections { await connection.close() }
        connections.removeAll()
        let finishedReaders = readers
        _ = await firstResult(within: .seconds(5)) {
            for reader in finishedReaders { await reader.value }
            return true
        }
        for reader in readers { reader.cancel() }
        relay.cancel()
        await server.shutdown()
        listenerLoop.shutdown()
        talkerLoop.shutdown()
        report(ladder, stepSeconds: stepSeconds, stopReason: stopReason, pinned: pinned, into: &result)
        if let libraryFloor {
            result.figure("library_floor_write_cpu_us_per_copy", libraryFloor.writeNanosecondsPerCopy / 1_000)
            result.figure("library_floor_acks_per_copy", libraryFloor.acknowledgementsPerCopy)
        }
        result.figure("relay_loops", Double(relayLoops.count))
        if let load { result.note? += "; 1-min load average \(load) when the scenario started" }
    }

    /// The relay loops' thread CPU time so far, nanoseconds.
    static func relayCPU(_ loops: [EventLoop]) -> UInt64 {
        loops.reduce(0) { $0 &+ ($1.threadCPUNanoseconds ?? 0) }
    }

    /// The kernel floor for `step` in this run: a tight `sendmmsg` loop of the step's packet size to as many
    /// loopback receivers (sender on the relay's CPU, receivers on the load generator's), and the same loop to
    /// discarding addresses (no receive path).
    private static func measureFloor(_ step: inout FanoutLadder.Step, pinned: Bool) async throws {
        let size = step.packetBytes ?? FanoutFrame.size + 40
        let packets = max(50_000, step.listeners * 20)
        let loopback = try await KernelSendFloor.loopback(
            packetSize: size, destinations: step.listeners, packets: packets, senderCPU: pinned ? 0 : nil,
            receiverCPU: pinned ? 1 : nil)
        step.floorMicrosecondsPerPacket = loopback.cpuNanosecondsPerPacket / 1_000
        // Optional (needs root and TUN): without it the step has no remote-listener projection.
        let sendOnly = try? await KernelSendFloor.sendOnly(
            packetSize: size, destinations: step.listeners, packets: packets, senderCPU: pinned ? 0 : nil)
        step.sendOnlyFloorMicrosecondsPerPacket = (sendOnly ?? nil).map { $0.cpuNanosecondsPerPacket / 1_000 }
    }

    /// Connects `count` listeners, 16 at a time; every connect is bounded by the handshake timeout.
    static func connect(
        _ count: Int, with client: TransportClient, to address: ServerAddress
    ) async throws
        -> [TransportConnection]
    {
        guard count > 0 else { return [] }
        return try await withThrowingTaskGroup(of: TransportConnection.self) { group in
            var connected: [TransportConnection] = []
            connected.reserveCapacity(count)
            var started = 0
            while started < min(16, count) {
                group.addTask { try await client.connect(to: address) }
                started += 1
            }
            while let connection = try await group.next() {
                connected.append(connection)
                if started < count {
                    group.addTask { try await client.connect(to: address) }
                    started += 1
                }
            }
            return connected
        }
    }

    /// Sends unmeasured frames until every listener heard one (the relay has them all as members), bounded by
    /// 5 s plus 1 ms per listener. Returns how many listeners heard a frame.
    static func warmUp(
        _ talker: TransportConnection, listeners: FanoutListeners, count: Int,
        sequence: inout UInt32
    ) async throws -> Int {
        listeners.resetHeard()
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(5) + .milliseconds(count)
        var next = clock.now
        while true {
            try send(talker, sequence: &sequence)
            next += .milliseconds(1000 / framesPerSecond)
            try await Task.sleep(until: next, clock: clock)
            let (listening, heard) = listeners.membership()
            if (listening >= count && heard >= count) || clock.now >= deadline { return heard }
        }
    }

    /// Sends `frames` frames at `framesPerSecond` on an absolute schedule; returns how many were handed over.
    static func talk(_ talker: TransportConnection, frames: Int, sequence: inout UInt32) async throws -> Int {
        let clock = ContinuousClock()
        var next = clock.now
        for _ in 0..<frames {
            try send(talker, sequence: &sequence)
            next += .milliseconds(1000 / framesPerSecond)
            try await Task.sleep(until: next, clock: clock)
        }
        return frames
    }

    private static func send(_ talker: TransportConnection, sequence: inout UInt32) throws {
        let frame = FanoutFrame(sequence: sequence, sentAt: MonotonicClock.now())
        sequence &+= 1
        try talker.sendDatagram(frame.bytes, expiresAfter: .milliseconds(100))
    }

    /// One step's figures, named `<label>_listeners`, `<label>_loss_percent`, `<label>_relay_p50_ms`, ….
    private static func record(_ step: FanoutLadder.Step, as label: String, into result: inout ScenarioResult) {
        result.figure("\(label)_listeners", Double(step.listeners))
        result.figure("\(label)_loss_percent", step.lossPercent)
        let latencies = [
            ("relay_p50", step.p50Milliseconds), ("relay_p99", step.p99Milliseconds),
            ("end_to_end_p50", step.endToEndP50Milliseconds),
            ("end_to_end_p99", step.endToEndP99Milliseconds),
        ]
        for case (let name, let value?) in latencies { result.figure("\(label)_\(name)_ms", value) }
        let cost = [
            ("relay_cpu_us_per_copy", step.relayCPUMicrosecondsPerCopy),
            ("floor_cpu_us_per_packet", step.floorMicrosecondsPerPacket),
            ("send_only_floor_cpu_us_per_packet", step.sendOnlyFloorMicrosecondsPerPacket),
            ("relay_cpu_over_floor", step.cpuOverFloor),
            ("library_floor_cpu_us_per_copy", step.libraryFloorMicrosecondsPerCopy),
            ("relay_cpu_over_kernel_and_library_floor", step.cpuOverKernelAndLibraryFloor),
            ("projected_remote_listeners_per_core", step.remoteListenersPerCore(framesPerSecond: framesPerSecond)),
            ("packet_bytes", step.packetBytes.map(Double.init)),
        ]
        for case (let name, let value?) in cost { result.figure("\(label)_\(name)", value) }
    }

    private static func report(
        _ ladder: FanoutLadder, stepSeconds: Int, stopReason: String?, pinned: Bool,
        into result: inout ScenarioResult
    ) {
        var notes: [String] = []
        if ladder.steps.isEmpty {
            result.note = "no step ran: \(stopReason ?? "unknown reason")"
            return
        }
        result.figure("max_listeners_sustained", Double(ladder.maxSustained))
        if let pass = ladder.lastPassing { record(pass, as: "last_pass", into: &result) }
        if let fail = ladder.firstFailing {
            record(fail, as: "first_fail", into: &result)
        } else if let stopReason {
            notes.append(stopReason)
        } else {
            notes.append("every step passed; the ladder ends at \(ladder.steps.last!.listeners)")
        }
        notes.append(ladder.criteria.description)
        notes.append(
            "CPU figures are thread CPU time (CLOCK_THREAD_CPUTIME_ID): relay loops per forwarded copy, and the "
                + "kernel floor measured after each step (sendmmsg of 64 packets of the step's size to as many "
                + "loopback receivers; send only: to an unread TUN device, no receive path), and the library "
                + "floor (ngtcp2 + GnuTLS in memory, \(FanoutFloor.listeners) listeners: the server's CPU to write each "
                + "copy and read its "
                + "share of ACKs, no sockets); target relay/floor <= "
                + "\(BenchReport.format(cpuOverFloorTarget)); latency figures are wall time and noisy on this VM")
        notes.append(
            "one talker, \(framesPerSecond) frames/s of \(FanoutFrame.size) B, \(stepSeconds) s per step; "
                + "relay, talker and listeners on three event loops of this process"
                + (pinned ? " (relay loop on CPU 0, talker and listeners on CPU 1)" : " sharing the cores"))
        result.note = notes.joined(separator: "; ")
    }
}
