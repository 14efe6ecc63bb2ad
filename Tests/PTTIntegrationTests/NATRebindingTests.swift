import ChildProcesses
import Foundation
import PTTTalkGroups
import PTTTransport
import TestSupport
import Testing
import TransportIO

/// A phone's NAT rebinds mid-call (`Tests/Peers/rebinding_nat.py` moves the client's mapping to a new port or
/// address after 30 packets and deletes the old one): the relay must follow the client to its new address —
/// ngtcp2 validates the new path, the relay sends every packet to the address ngtcp2 chose — so the call goes on;
/// a replayed packet from a third address must not take the call there.
@Suite("NAT rebinding: the relay follows the phone", .serialized, .enabled(if: peersEnabled), .integration)
struct NATRebindingTests {
    static let nat = "\(Fixtures.root)/Tests/Peers/rebinding_nat.py"
    /// Datagrams that must come back of 300 sent at a voice call's 20 ms cadence: 90 %, the bar; 75 % in a
    /// sanitized build, whose 5–10× slower relay takes longer to validate the new path while audio keeps coming (a
    /// fixed relay: 300 of 300 here; the unfixed one: 12). At the CLI's default 1 ms spacing a 30 ms stall of a
    /// loaded test machine alone cost 30 datagrams at the rebinding moment: that measured the machine, not the relay.
    static let minimumEchoed = sanitizedBuild ? 225 : 270

    struct Call {
        var echoed = 0
        var counters: [String: Any] = [:]
        var pathChanges: [(from: String, to: String)] = []
        /// The relay's per-loop QUIC counters at the end of the call, and how it steered packets.
        var loopCounters: [QUICLoopCounters] = []
        var steering: ReuseportGroup.Steering = .single
    }

    /// A relay on `listen`, the NAT in front of it with `natArguments`, and a 300-datagram call through the NAT
    /// (`connect` with `clientArguments` added). `configure` adjusts the relay's configuration (event loops,
    /// steering).
    static func call(
        listen: String = "127.0.0.1:0", _ natArguments: [String], clientArguments: [String] = [],
        configure: (inout ServerConfiguration) -> Void = { _ in }
    ) async throws -> Call {
        let events = EventLog()
        var configuration = Fixtures.serverConfiguration(listen: listen)
        configure(&configuration)
        let server = try await TransportServer.bind(configuration: configuration)
        let relay = Task { await EchoRelay.run(server) { events.append($0) } }
        defer { relay.cancel() }
        let serverPort = try #require(server.quicAddress).port
        let nat = try await ChildServer.start(
            try AioquicInteropTests.python, [Self.nat, "\(serverPort)"] + natArguments)
        defer { nat.stopNow() }
        let result = try await runProgram(
            Subprocess.cli,
            [
                "connect", nat.address, "--ca", Fixtures.ca, "--server-name", "localhost", "--transport", "quic",
                "--message", "join 7", "--datagrams", "300", "--interval", "20", "--json",
            ] + clientArguments)
        #expect(result.status == 0, "\(result.stderr)")
        var call = Call()
        call.echoed = jsonObject(result.stdout)?["datagrams_echoed"] as? Int ?? 0
        call.counters = jsonObject(await nat.stop().output) ?? [:]
        call.pathChanges = events.all().compactMap { event in
            if case .pathChanged(let from, let to) = event { return (from, to) }
            return nil
        }
        call.loopCounters = await server.quicLoopCounters()
        call.steering = server.steering
        await server.shutdown()
        return call
    }

    @Test(arguments: [nil, "127.0.0.2"])
    func audioKeepsFlowingAfterARebinding(newAddress: String?) async throws {
        let call = try await Self.call(["--rebind-after", "30"] + (newAddress.map { ["--new-address", $0] } ?? []))
        #expect(call.echoed >= Self.minimumEchoed, "\(call.counters)")
        #expect(call.counters["rebound"] as? Bool == true, "\(call.counters)")
        // The echoes came back through the new mapping (the old one is closed); how many packets carried them
        // depends on how the relay's writes coalesced.
        #expect((call.counters["server_packets_new_mapping"] as? Int ?? 0) > 0, "\(call.counters)")
        #expect(call.pathChanges.count == 1, "path changes seen by the relay: \(call.pathChanges)")
        if let newAddress { #expect(call.pathChanges.first?.to.hasPrefix(newAddress + ":") == true) }
    }

    @Test func overIPv6() async throws {
        let call = try await Self.call(listen: "[::1]:0", ["--ipv6", "--rebind-after", "30"])
        #expect(call.echoed >= Self.minimumEchoed, "\(call.counters)")
        #expect(call.pathChanges.count == 1, "\(call.pathChanges)")
    }

    @Test func aRebindingStormKeepsTheCallUp() async throws {
        // The source port changes every 100 ms: the relay follows each move.
        let call = try await Self.call(["--rebind-after", "30", "--storm-ms", "100"])
        #expect(call.echoed >= Self.minimumEchoed, "\(call.counters)")
        #expect((call.counters["rebindings"] as? Int ?? 0) >= 2, "\(call.counters)")
        // One report per validated move (a move that came before the previous one was validated, or at the very
        // end of the call, may never be reported).
        let rebindings = call.counters["rebindings"] as? Int ?? 0
        #expect(call.pathChanges.count >= 1 && call.pathChanges.count <= rebindings, "\(call.pathChanges)")
    }

    @Test func aReplayedPacketFromAThirdAddressDoesNotTakeTheCall() async throws {
        // The replay arrives first, so the genuine packet is the duplicate; the relay probes the third address
        // (which cannot answer), finds it invalid and keeps the call on the validated path.
        let call = try await Self.call(["--rebind-after", "100000", "--spoof-from", "127.0.0.3", "--spoof-at", "150"])
        #expect(call.echoed >= Self.minimumEchoed, "\(call.counters)")
        #expect((call.counters["server_packets_to_spoofer"] as? Int ?? 0) <= 10, "\(call.counters)")
        #expect(call.pathChanges.allSatisfy { !$0.to.hasPrefix("127.0.0.3:") }, "\(call.pathChanges)")
    }
}
