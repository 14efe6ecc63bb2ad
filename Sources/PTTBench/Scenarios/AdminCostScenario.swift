import Foundation
import PTTTalkGroups
import PTTTransport
import TransportIO

/// `bench --scenario admin-cost`: what the admin endpoint's `/metrics` costs a relay forwarding a talker's burst to
/// 1,000 listeners (200 with fewer than 10 iterations). A scrape gathers the counters on every event loop
/// (`TransportServer.relayMetrics`, one short task a loop reading each live connection's counters); rendering the
/// text and the HTTP exchange run on the admin thread, not measured here. Two figures, on the relay loops' thread
/// CPU time:
/// - per scrape: 20 scrapes back to back under the burst, their loops' CPU beyond the burst's own, divided by 20;
///   as a share of the loops' CPU per second of forwarding, the overhead at one scrape a second;
/// - per quiet scrape: 20 scrapes back to back with the listeners connected and no burst, the loops' CPU divided
///   by 20 — the scrape's own cost, without the burst's noise; against the forwarding CPU as above;
/// - windows: alternating windows of the same burst with and without a scrape every second (3 each), medians
///   compared (noisy on a shared machine: the per-scrape figure is the steadier one).
/// The target is ≤ 2 % of the relay's CPU at 1,000 listeners (Prometheus scrapes every 15 s by default).
enum AdminCostScenario {
    static func run(_ result: inout ScenarioResult, options: BenchOptions, environment: BenchEnvironment) async throws {
        let quick = options.iterations < 10
        let count = quick ? 200 : 1000
        let seconds = quick ? 2 : 5
        _ = CapacityScenarios.raiseFileLimit(to: 30_000)
        var configuration = ServerConfiguration(
            quic: nil, certificateChain: options.certificate, privateKey: options.privateKey)
        configuration.maxConnections = count + 16
        configuration.idleTimeout = .seconds(120)
        if let loops = options.relayLoops { configuration.eventLoops = loops }
        let (server, address, relay) = try await environment.startRelay(
            configuration, behaviour: .fanout(FanoutStatistics()))
        defer { relay.cancel() }
        let clientConfiguration = ClientConfiguration(
            serverName: "localhost", trust: .caFile(options.certificateAuthority), idleTimeout: .seconds(120),
            handshakeTimeout: .seconds(10))
        let listenerClient = TransportClient(
            configuration: clientConfiguration, loop: try environment.makeClientSideLoop(name: "bench-listeners"))
        let speaker = try await TransportClient(
            configuration: clientConfiguration, loop: try environment.makeClientSideLoop(name: "bench-talker")
        ).connect(to: address)
        let listeners = FanoutListeners()
        options.progress("admin-cost: connecting \(count) listeners")
        let connections = try await FanoutScenario.connect(count, with: listenerClient, to: address)
        let readers = connections.map { connection in Task { await listeners.listen(connection) } }
        defer {
            for reader in readers { reader.cancel() }
        }
        var sequence: UInt32 = 0
        let heard = try await FanoutScenario.warmUp(speaker, listeners: listeners, count: count, sequence: &sequence)
        let frames = seconds * FanoutScenario.framesPerSecond
        let loops = server.loops

        // 20 scrapes with the listeners connected and quiet: the loops' CPU is the scrapes' own (the steadiest
        // figure on a shared machine; only keep-alives besides).
        let idleBefore = FanoutScenario.relayCPU(server.loops)
        for _ in 0..<20 { _ = await server.relayMetrics() }
        let perIdleScrape = Double(FanoutScenario.relayCPU(server.loops) &- idleBefore) / 1e9 / 20

        // Windows with and without a scrape every second, alternating.
        var without: [Double] = []
        var with: [Double] = []
        var scrapes = 0
        for _ in 0..<3 {
            for scraping in [false, true] {
                let scraper =
                    scraping
                    ? Task { () -> Int in
                        var made = 0
                        while !Task.isCancelled {
                            _ = await server.relayMetrics()
                            made += 1
                            try? await Task.sleep(for: .seconds(1))
                        }
                        return made
                    } : nil
                let before = FanoutScenario.relayCPU(loops)
                _ = try await FanoutScenario.talk(speaker, frames: frames, sequence: &sequence)
                scraper?.cancel()
                scrapes += await scraper?.value ?? 0
                let used = Double(FanoutScenario.relayCPU(loops) &- before) / 1e9
                if scraping { with.append(used) } else { without.append(used) }
            }
        }
        // 20 scrapes back to back during one more window, against that window's own forwarding.
        let before = FanoutScenario.relayCPU(loops)
        let burst = Task { [sequence] in
            var next = sequence
            return try await FanoutScenario.talk(speaker, frames: frames, sequence: &next)
        }
        for _ in 0..<20 { _ = await server.relayMetrics() }
        _ = try await burst.value
        let burstAndScrapes = Double(FanoutScenario.relayCPU(loops) &- before) / 1e9
        let forwarding = median(without)
        let perScrape = max(0, burstAndScrapes - forwarding) / 20
        let perSecond = forwarding / Double(seconds)

        result.iterations = 3
        result.figure("listeners", Double(count))
        result.figure("listeners_hearing_after_warm_up", Double(heard))
        result.figure("relay_loops", Double(loops.count))
        result.figure("loop_cpu_ms_per_second_forwarding", perSecond * 1000)
        result.figure("loop_cpu_ms_per_scrape", perScrape * 1000)
        result.figure("loop_cpu_ms_per_scrape_quiet", perIdleScrape * 1000)
        result.figure(
            "overhead_percent_at_one_scrape_per_second_quiet", perSecond > 0 ? perIdleScrape / perSecond * 100 : -1)
        result.figure("overhead_percent_at_one_scrape_per_second", perSecond > 0 ? perScrape / perSecond * 100 : -1)
        result.figure("window_loop_cpu_s_without_scrapes_median", forwarding)
        result.figure("window_loop_cpu_s_with_scrapes_median", median(with))
        result.figure(
            "window_overhead_percent", forwarding > 0 ? (median(with) - forwarding) / forwarding * 100 : -1)
        result.figure("scrapes_in_windows", Double(scrapes))
        result.note =
            "relay loops' thread CPU; \(seconds) s windows of a 50 frames/s burst to \(count) listeners; "
            + "a scrape = TransportServer.relayMetrics() (the admin thread's rendering and HTTP not included)"
        for connection in connections { await connection.close(code: 0, reason: "done") }
        await speaker.close(code: 0, reason: "done")
    }

    private static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
    }
}
