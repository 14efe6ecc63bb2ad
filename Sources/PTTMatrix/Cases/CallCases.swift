import Foundation
import NetworkEmulation
import PTTTransport
import TransportCore
import TransportIO

/// The cases that run a call (20 ms audio frames as datagrams, a control message every second) while the path
/// misbehaves; judged from what came back, from what our relay counted, and from the path's counters.
enum CallCases {
    /// Our client's call against the pairing's server; `impair` is applied when the call starts.
    static func call(
        _ run: CaseRun, seconds: Double, impair: Impairments? = nil, keyLogFile: String? = nil,
        adjust: @escaping (inout ServerConfiguration) -> Void = { _ in }
    ) async throws -> (Call.Report, relayDatagrams: Int?, relayPathChanges: Int?) {
        let server = try await run.startServer(adjust: adjust)
        return try await run.using(server) {
            guard let address = server.address else { throw MatrixError("the server printed no usable address") }
            let client = OurClient.make(run.path, run.options, keyLogFile: keyLogFile)
            let connection = try await client.connect(to: address)
            if let impair { run.path.network.impair(impair) }
            let report = try await Call.run(connection, seconds: seconds)
            await connection.close()
            return (report, server.relay?.tally.datagrams, server.relay?.tally.pathChanges)
        }
    }

    private static func percent(_ value: Double) -> String { String(format: "%.1f %%", value * 100) }

    /// transferloss and transfercorruption: 2 % per direction, bursts of at most 3.
    static func lossyCall(_ run: CaseRun, corruption: Bool) async throws -> Outcome {
        let impairments = Impairments(maximumBurst: 3, corruptionRate: corruption ? 0.02 : 0)
        if run.pairing == .aioquicClient { return try await aioquicBurst(run, impairments) }
        let seconds = run.options.callSeconds
        let (report, relayDatagrams, _) = try await call(run, seconds: seconds, impair: impairments)
        let counters = run.path.network.counters
        let wire =
            "wire: \(corruption ? counters.corrupted : counters.lost) of "
            + "\(counters.clientToServer.packets + counters.serverToClient.packets) packets "
            + (corruption ? "corrupted" : "lost")
        let control =
            "control \(report.controlEchoed)/\(report.controlSent) echoed, slowest "
            + "\(Int(report.slowestControlMilliseconds)) ms"
        let controlOK = report.controlEchoed == report.controlSent && report.slowestControlMilliseconds <= 1_000
        guard let relayDatagrams else {  // aioquic's echo server counts nothing: judge the round trip
            let share = Double(report.framesEchoed) / Double(max(1, report.framesSent))
            return MatrixCell.judged(
                share >= 0.97 * 0.97 && report.duplicates == 0 && controlOK,
                "\(Int(seconds)) s call: \(percent(share)) of frames echoed (both directions; >= 94.1 %), "
                    + "\(report.duplicates) duplicated; \(control); \(wire)")
        }
        let up = Double(relayDatagrams) / Double(max(1, report.framesSent))
        let down = Double(report.framesEchoed) / Double(max(1, relayDatagrams))
        return MatrixCell.judged(
            up >= 0.97 && down >= 0.97 && report.duplicates == 0 && controlOK,
            "\(Int(seconds)) s call: frames delivered \(percent(up)) up, \(percent(down)) down, "
                + "\(report.duplicates) duplicated; \(control); \(wire)")
    }

    /// aioquic's client script sends its datagrams in one burst (1 ms apart) after its stream messages.
    private static func aioquicBurst(_ run: CaseRun, _ impairments: Impairments) async throws -> Outcome {
        let server = try await run.startServer()
        let frames = min(3_000, Int(run.options.callSeconds * 50))
        let result = try await run.using(server) {
            run.path.network.impair(impairments)
            return try await run.peers().runClient(
                run.path, server.address!, options: run.options,
                arguments: ["--messages", "20", "--datagrams", "\(frames)"], timeout: 30)
        }
        guard result.ok, let relay = server.relay else { return .fail("aioquic client: \(result.error)") }
        let up = Double(relay.tally.datagrams) / Double(max(1, frames))
        let down = Double(result.integer("datagrams_echoed")) / Double(max(1, relay.tally.datagrams))
        return MatrixCell.judged(
            up >= 0.97 && down >= 0.97 && result.integer("messages_echoed") == 20,
            "\(frames) datagrams 1 ms apart: delivered \(percent(up)) up, \(percent(down)) down; control "
                + "\(result.integer("messages_echoed"))/20 echoed")
    }

    static func blackhole(_ run: CaseRun) async throws -> Outcome {
        guard run.pairing != .aioquicClient else {
            return .unsupported("aioquic's client script sends one burst, not a paced call an outage can cut")
        }
        let seconds = max(8, min(run.options.callSeconds, 20))
        let outage = BlackholeSchedule(start: 3_000_000_000, duration: 2_000_000_000)
        let (report, _, _) = try await call(run, seconds: seconds, impair: Impairments(blackhole: outage))
        let during = report.echoedShare(from: 3.05, to: 4.95)
        let after = report.echoedShare(from: 6)
        let blackholed = run.path.network.counters.blackholed
        return MatrixCell.judged(
            report.survived && report.lateFrames == 0 && report.duplicates == 0 && after >= 0.9 && during == 0
                && report.controlEchoed == report.controlSent,
            "\(Int(seconds)) s call, 2 s outage at 3 s (\(blackholed) packets dropped): survived "
                + "\(report.survived), frames sent in the outage echoed \(percent(during)), \(report.lateFrames) "
                + "echoed over 1 s late, \(percent(after)) echoed from 1 s after it; control "
                + "\(report.controlEchoed)/\(report.controlSent)")
    }

    static func rebind(_ run: CaseRun, address: Bool) async throws -> Outcome {
        guard run.pairing != .aioquicClient else {
            return .unsupported("aioquic's client script sends one burst, not a paced call to rebind under")
        }
        let seconds = max(8, min(run.options.callSeconds, 30))
        let nat = NATRebinding(firstRebind: 2_000_000_000, interval: 5_000_000_000, rewriteAddress: address)
        let (report, _, pathChanges) = try await call(run, seconds: seconds, impair: Impairments(nat: nat))
        let counters = run.path.network.counters
        let share = report.echoedShare(from: 0)
        let addressesOK = !address || counters.clientAddressesSeen.count >= 2
        return MatrixCell.judged(
            report.survived && counters.rebinds >= 1 && addressesOK && share >= 0.9
                && report.controlEchoed == report.controlSent,
            "\(Int(seconds)) s call: \(counters.rebinds) rebinds, \(counters.clientAddressesSeen.count) client "
                + "address(es) on the wire, \(counters.natDropped) packets to deleted mappings dropped"
                + (pathChanges.map { ", relay followed \($0) path change(s)" } ?? "")
                + "; \(percent(share)) of frames echoed, longest gap \(report.longestGap) frames; control "
                + "\(report.controlEchoed)/\(report.controlSent)")
    }

    /// connectionmigration: 2 s into a call the client moves its connection to a second address of its side of
    /// the path (`migrate(to:)`, PATH_CHALLENGE under a new connection ID). Judged from the wire (a second client
    /// address seen by the delay line, one handshake: the server issued one set of connection IDs) and the call.
    static func connectionMigration(_ run: CaseRun) async throws -> Outcome {
        guard run.pairing != .aioquicClient else {
            return .unsupported("aioquic's client script cannot migrate (it sends one burst from one socket)")
        }
        let newAddress = "198.18.0.3"
        try run.path.network.addAddress(newAddress, on: .client)
        let seconds = max(6, min(run.options.callSeconds, 30))
        let server = try await run.startServer()
        return try await run.using(server) {
            guard let address = server.address else { throw MatrixError("the server printed no usable address") }
            let connection = try await OurClient.make(run.path, run.options).connect(to: address)
            var watch = Impairments()
            watch.recordClientAddresses = true
            run.path.network.impair(watch)
            let migration = Task { () -> String in
                try? await Task.sleep(for: .seconds(2))
                do {
                    return try await connection.migrate(to: LocalEndpoint(host: newAddress), waitingUpTo: .seconds(2))
                } catch {
                    return "failed: \(error)"
                }
            }
            let report = try await Call.run(connection, seconds: seconds)
            let moved = await migration.value
            let migrations = await connection.statistics().migrations
            await connection.close()
            let counters = run.path.network.counters
            let handshakes = run.path.network.wire.handshakes
            let share = report.echoedShare(from: 0)
            return MatrixCell.judged(
                report.survived && migrations == 1 && counters.clientAddressesSeen.count >= 2 && handshakes == 1
                    && share >= 0.9 && report.controlEchoed == report.controlSent,
                "\(Int(seconds)) s call, migrate to \(newAddress): \(moved.hasPrefix("failed") ? moved : "now " + moved); "
                    + "\(counters.clientAddressesSeen.count) client addresses on the wire, \(handshakes) handshake(s); "
                    + "\(percent(share)) of frames echoed, longest gap \(report.longestGap) frames; control "
                    + "\(report.controlEchoed)/\(report.controlSent)")
        }
    }

    /// keyupdate: 2 s into a call the client starts a key update (`updateKeys()`) and the relay follows. Judged
    /// from the capture, decrypted by tshark with the client's key log (the key phase bit is header-protected):
    /// 1-RTT packets in key phase 1 from both sides; and from the call: it survives, every control message comes
    /// back (the reliable transfer the interop runner's case asks to complete; one is sent each second, so those
    /// after the update prove the new keys both ways), and at least half the frames sent from 1 s after the update
    /// on come back. The overall share and the longest gap are reported, not judged: on a loaded machine the
    /// scheduler makes gaps of its own (a frame expires after 100 ms in a send queue: 12.5 % of a 30 s call's
    /// frames once at load 19–25, key phase 1 seen both ways, every control message back), and a broken update
    /// shows as a call that stops echoing or closes.
    static func keyUpdate(_ run: CaseRun) async throws -> Outcome {
        guard run.pairing != .aioquicClient else {
            return .unsupported("aioquic's client script cannot start a key update")
        }
        guard Tshark.available else {
            return .unsupported("tshark is not installed: the key phase is header-protected and needs a decryption")
        }
        let capture = run.captureFile("keyupdate")
        let keyLog = capture + ".keys"
        defer {
            try? FileManager.default.removeItem(atPath: capture)
            try? FileManager.default.removeItem(atPath: keyLog)
        }
        try run.path.network.capture(to: capture)
        let seconds = max(6, min(run.options.callSeconds, 30))
        let server = try await run.startServer()
        return try await run.using(server) {
            guard let address = server.address else { throw MatrixError("the server printed no usable address") }
            let client = OurClient.make(run.path, run.options, keyLogFile: keyLog)
            let connection = try await client.connect(to: address)
            let update = Task { () -> String in
                try? await Task.sleep(for: .seconds(2))
                do {
                    try await connection.updateKeys()
                    return "started"
                } catch {
                    return "failed: \(error)"
                }
            }
            let report = try await Call.run(connection, seconds: seconds)
            let started = await update.value
            await connection.close()
            let phases = try await Tshark.keyPhaseOne(
                capture: capture, keyLog: keyLog, client: EmulatedNetwork.clientAddress)
            let share = report.echoedShare(from: 0)
            let shareAfterUpdate = report.echoedShare(from: 3)
            return MatrixCell.judged(
                report.survived && started == "started" && phases?.client == true && phases?.server == true
                    && shareAfterUpdate >= 0.5 && report.controlEchoed == report.controlSent,
                "\(Int(seconds)) s call, key update at 2 s: \(started); key phase 1 seen from the client: "
                    + "\(phases?.client == true), from the server: \(phases?.server == true) (tshark with the key "
                    + "log); \(percent(share)) of frames echoed (\(percent(shareAfterUpdate)) from 1 s after the "
                    + "update), longest gap \(report.longestGap) frames; control "
                    + "\(report.controlEchoed)/\(report.controlSent)")
        }
    }

    /// 2,000 control messages, each on its own stream, through a relay that allows 1,000 streams at a time, with
    /// a call running alongside.
    static func transfer(_ run: CaseRun) async throws -> Outcome {
        let streams = 2_000
        let server = try await run.startServer(adjust: { $0.maxStreamsPerConnection = 1_000 })
        if run.pairing == .aioquicClient {
            let result = try await run.using(server) {
                try await run.peers().runClient(
                    run.path, server.address!, options: run.options,
                    arguments: ["--messages", "1", "--streams", "\(streams)", "--datagrams", "200"], timeout: 60)
            }
            return MatrixCell.judged(
                result.ok && result.integer("messages_echoed") == streams,
                result.ok
                    ? "\(result.integer("messages_echoed"))/\(streams) messages on separate streams echoed "
                        + "(relay limit 1,000 streams), \(result.integer("datagrams_echoed"))/200 datagrams"
                    : "aioquic client: \(result.error)")
        }
        return try await run.using(server) {
            guard let address = server.address else { throw MatrixError("the server printed no usable address") }
            let connection = try await OurClient.make(run.path, run.options).connect(to: address)
            let talk = Task { try await Call.run(connection, seconds: 5) }
            let failure = Locked<String?>(nil)
            let echoed = await withTaskGroup(of: Bool.self) { group in
                var next = 0
                var echoed = 0
                func add() {
                    let index = next
                    next += 1
                    group.addTask {
                        do {
                            let stream = try await connection.openStream()
                            let message = Array("control message \(index)".utf8)
                            try await stream.send(message)
                            try await stream.finish()
                            return try await stream.nextMessage()?.bytes == message
                        } catch {
                            failure.withLock { $0 = $0 ?? "\(error)" }
                            return false
                        }
                    }
                }
                for _ in 0..<100 { add() }
                while let ok = await group.next() {
                    if ok { echoed += 1 }
                    if next < streams && failure.withLock({ $0 }) == nil { add() }
                }
                return echoed
            }
            let report = (try? await talk.value) ?? Call.Report()
            await connection.close()
            let share = Double(report.framesEchoed) / Double(max(1, report.framesSent))
            return MatrixCell.judged(
                echoed == streams && share >= 0.97,
                "\(echoed)/\(streams) messages on separate streams echoed ("
                    + (server.relay == nil ? "aioquic's stream limit" : "relay limit 1,000 streams at a time")
                    + "); audio alongside \(percent(share)) echoed"
                    + (failure.withLock { $0 }.map { "; first failure: \($0)" } ?? ""))
        }
    }
}
