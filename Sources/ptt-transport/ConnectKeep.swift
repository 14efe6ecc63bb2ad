import CommandLineSupport
import Foundation
import PTTTransport

/// `ptt-transport connect --keep SECONDS`: stays connected through a `TransportLink` for that long, sending a
/// numbered datagram every 20 ms (an audio stream's pace) and counting the echoes, so a handover, a relay
/// restart or a network cut can be watched on a real path: the fraction echoed, the longest gap between echoes
/// and the paths the link used.
enum ConnectKeep {
    static let interval = Duration.milliseconds(20)

    static func run(
        address: ServerAddress, configuration: ClientConfiguration, message: [UInt8], sessionFile: String?,
        seconds: Double, json: Bool
    ) async throws {
        guard seconds > 0, seconds <= 86_400 else {
            throw Arguments.Failure(description: "--keep takes a number of seconds above 0, at most 86400")
        }
        let store: ResumptionStore =
            sessionFile.map { path in
                .file(path) { error in FileHandle.standardError.write(Data("ptt-transport: \(error)\n".utf8)) }
            } ?? .memoryOnly
        let link = TransportLink(
            client: TransportClient(configuration: configuration), to: address,
            rejoin: [EarlyMessage(message, replaySafe: true)], resumption: store)
        defer { link.stop() }
        let tally = KeepTally()
        let clock = ContinuousClock()
        // The clock starts once the link is first ready (or has stopped): the first handshake is not a gap.
        let giveUp = clock.now.advanced(by: .milliseconds(Int64(seconds * 1000)))
        while clock.now < giveUp, link.connection == nil {
            if case .stopped(let error?) = link.status { throw error }
            try? await Task.sleep(for: .milliseconds(2))
        }
        let start = clock.now
        let end = start.advanced(by: .milliseconds(Int64(seconds * 1000)))
        let watcher = Task { await follow(link, tally: tally) }
        let sent = await send(on: link, until: end)
        try? await Task.sleep(for: .milliseconds(300))  // the last echoes are on their way
        watcher.cancel()
        let status = link.status
        link.stop()
        let summary = await tally.summary(sentFrom: start, to: end)
        if summary.paths.isEmpty {
            if case .stopped(let error?) = status { throw error }
            throw Arguments.Failure(description: "the link never became ready in \(seconds) s (last status: \(status))")
        }
        let fraction = sent == 0 ? 0 : Double(summary.echoed) / Double(sent)
        let result: [String: Any] = [
            "keep_seconds": seconds, "datagrams_sent": sent, "datagrams_echoed": summary.echoed,
            "echoed_fraction": rounded(fraction), "longest_gap_ms": rounded(summary.longestGapMilliseconds),
            "paths": summary.paths.map { $0.rawValue }, "connections": summary.paths.count,
            "rejoin_answers": summary.rejoinAnswers, "path": summary.paths[0].rawValue,
        ]
        if json {
            JSONOutput.print(result)
        } else {
            print(
                "kept a link to \(address) for \(seconds) s over \(summary.paths.map { $0.rawValue }): "
                    + "\(summary.echoed)/\(sent) datagrams echoed, longest gap "
                    + "\(rounded(summary.longestGapMilliseconds)) ms")
        }
    }

    /// Sends a numbered datagram every 20 ms on whatever connection is ready until `end`; returns how many
    /// were due (the ones due while the link was down count as sent and lost, as audio would be).
    private static func send(on link: TransportLink, until end: ContinuousClock.Instant) async -> Int {
        let clock = ContinuousClock()
        var next = clock.now
        var index: UInt32 = 0
        while next < end {
            var payload = withUnsafeBytes(of: index.bigEndian) { Array($0) }
            payload += [UInt8](repeating: 0x55, count: 76)
            try? link.connection?.sendDatagram(payload, expiresAfter: .milliseconds(100))
            index += 1
            next = next.advanced(by: interval)
            try? await Task.sleep(until: next)
        }
        return Int(index)
    }

    /// Follows every connection the link makes: its path, its rejoin answer, its datagram echoes.
    private static func follow(_ link: TransportLink, tally: KeepTally) async {
        await link.forEachConnection { connection in
            await tally.connected(connection.path)
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    if (try? await connection.earlyStream?.nextMessage()) != nil { await tally.rejoinAnswered() }
                }
                group.addTask {
                    for await datagram in connection.datagrams where datagram.payload.count >= 4 {
                        let index = datagram.payload.prefix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
                        await tally.echoed(index, at: ContinuousClock.now)
                    }
                }
                _ = try? await connection.closed()
                group.cancelAll()
            }
        }
    }
}

/// What `connect --keep` saw.
actor KeepTally {
    private var echoes: [UInt32: ContinuousClock.Instant] = [:]
    private(set) var paths: [TransportPath] = []
    private var rejoinAnswers = 0

    func connected(_ path: TransportPath) { paths.append(path) }
    func rejoinAnswered() { rejoinAnswers += 1 }
    func echoed(_ index: UInt32, at instant: ContinuousClock.Instant) {
        if echoes[index] == nil { echoes[index] = instant }
    }

    /// Distinct echoes, the longest silence between echoes (from the first send to the end of sending), the
    /// paths and the rejoin answers.
    func summary(
        sentFrom start: ContinuousClock.Instant, to end: ContinuousClock.Instant
    ) -> (
        echoed: Int, longestGapMilliseconds: Double, paths: [TransportPath], rejoinAnswers: Int
    ) {
        let arrivals = echoes.values.sorted()
        var longest = Duration.zero
        var last = start
        for arrival in arrivals {
            longest = max(longest, arrival - last)
            last = max(last, arrival)
        }
        longest = max(longest, end - last)
        return (echoes.count, milliseconds(longest), paths, rejoinAnswers)
    }
}
