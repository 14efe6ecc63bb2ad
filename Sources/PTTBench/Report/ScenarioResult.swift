/// What one scenario measured. Setup scenarios fill the latency samples; capacity scenarios their named figures.
public struct ScenarioResult: Sendable {
    public var scenario: String
    public var iterations: Int
    /// Time from `connect` to handshake completion (ms).
    public var handshake = Samples()
    /// Time from `connect` to the first response to a control message (ms).
    public var firstResponse = Samples()
    /// Time from `connect` to the first audio datagram echoed (ms).
    public var firstDatagram = Samples()
    /// Named figures of capacity scenarios (e.g. `datagrams_sent_per_s`), in insertion order.
    public var figures: [(name: String, value: Double)] = []
    /// Why the scenario did not run or what limited it.
    public var note: String?
    /// Peer implementation the scenario ran against ("ptt" or "aioquic").
    public var peer = "ptt"

    public init(scenario: String, iterations: Int) {
        self.scenario = scenario
        self.iterations = iterations
    }

    mutating func figure(_ name: String, _ value: Double) { figures.append((name, value)) }
}
