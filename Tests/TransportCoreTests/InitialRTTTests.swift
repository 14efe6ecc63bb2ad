import Testing

@testable import TransportCore

/// The configured initial RTT is what ngtcp2 arms its first probe timeout with, on a virtual clock.
@Suite("Initial RTT on a virtual clock")
struct InitialRTTTests {
    /// Writes a cold client's first flight into a network that delivers nothing and returns how long after it the
    /// client's next timer fires, and whether the client sends a probe then.
    private func firstProbe(
        initialRTT: UInt64?, resumption: ClientResumption? = nil
    ) throws -> (timeout: UInt64, probeSent: Bool) {
        var parameters = QUICParameters()
        parameters.initialRTT = initialRTT
        let net = try VirtualNetwork(parameters: parameters)
        let client = try net.addClient(parameters: parameters, resumption: resumption)
        var buffer = [UInt8](repeating: 0, count: 1500)
        let sentAt = net.now
        var packets = 0
        while buffer.withUnsafeMutableBytes({ client.writePacket(into: $0, now: sentAt).length }) > 0 { packets += 1 }
        #expect(packets > 0)
        let deadline = try #require(client.nextTimeout)
        client.handleTimeout(now: deadline)
        let probe = buffer.withUnsafeMutableBytes { client.writePacket(into: $0, now: deadline).length }
        return (deadline - sentAt, probe > 0)
    }

    /// RFC 9002 §6.2.1 before any RTT sample: smoothed RTT = initial RTT, rttvar = half of it, and no ACK delay in
    /// the Initial space, so the probe timeout is three times the initial RTT.
    private func expectedProbeTimeout(_ initialRTT: UInt64) -> UInt64 { initialRTT + 4 * (initialRTT / 2) }

    @Test(arguments: [100, 333])
    func coldClientProbesAfterThreeInitialRTTs(milliseconds: UInt64) throws {
        let initialRTT = milliseconds * nanosecondsPerMillisecond
        let probe = try firstProbe(initialRTT: initialRTT)
        #expect(probe.timeout == expectedProbeTimeout(initialRTT))
        #expect(probe.probeSent, "the lost Initial is re-sent when the probe timer fires")
    }

    @Test func aSmallerInitialRTTProbesSooner() throws {
        let mobile = try firstProbe(initialRTT: 100 * nanosecondsPerMillisecond).timeout
        let conservative = try firstProbe(initialRTT: 333 * nanosecondsPerMillisecond).timeout
        #expect(mobile < conservative)
    }

    @Test func aSavedRTTOverridesTheConfiguredOne() throws {
        let saved = 40 * nanosecondsPerMillisecond
        let resumption = ClientResumption(ticket: [1, 2, 3], transportParameters: [], token: [], smoothedRTT: saved)
        let probe = try firstProbe(initialRTT: 100 * nanosecondsPerMillisecond, resumption: resumption)
        #expect(probe.timeout == expectedProbeTimeout(saved))
    }

    @Test(arguments: [UInt64(0), 10 * nanosecondsPerSecond + 1, UInt64.max])
    func outOfRangeValuesAreRefused(value: UInt64) throws {
        var parameters = QUICParameters()
        parameters.initialRTT = value
        let error = #expect(throws: TransportError.self) { try parameters.validate() }
        #expect(error?.code == .invalidConfiguration)
        #expect(error?.message.contains("initial RTT") == true)
        let net = try VirtualNetwork()
        let refused = #expect(throws: TransportError.self) { try net.addClient(parameters: parameters) }
        #expect(refused?.code == .invalidConfiguration)
    }
}
