/// A relay worker's share of its parent's sockets (`ptt-transport serve --workers N`): the parent binds every
/// worker's UDP sockets in one SO_REUSEPORT group, attaches the kernel's connection-ID steering over all of them,
/// and starts each worker with its own sockets as descriptors; a worker that dies is restarted on the same ones, so
/// the group — and which socket each connection ID steers to — never changes.
package struct InheritedSockets: Sendable, Equatable {
    /// This worker's UDP sockets, one per event loop, in loop order.
    package var udp: [Int32]
    /// The shared TCP listener (every worker accepts from it), if the relay serves TCP.
    package var tcp: Int32?
    /// The group index of this worker's first loop: its loops are `firstLoop ..< firstLoop + udp.count`.
    package var firstLoop: Int
    /// The loops of every worker together: the steering program's socket count.
    package var totalLoops: Int
    /// The memory the workers count in together (`RelayWideState`), and this worker's place there: the relay's
    /// limits then hold for the relay, not per worker. nil: this worker counts alone.
    package var relayWide: RelayWideShare?
    /// A pipe to write one byte into once the worker serves (an upgrade's new generation: the supervisor moves
    /// new connections to it only then); nil for a worker nobody waits for.
    package var ready: Int32?

    /// A worker's way into `RelayWideState`: the region's descriptor and the worker's index among the workers.
    package struct RelayWideShare: Sendable, Equatable {
        package var descriptor: Int32
        package var worker: Int

        package init(descriptor: Int32, worker: Int) {
            self.descriptor = descriptor
            self.worker = worker
        }
    }

    package init(
        udp: [Int32], tcp: Int32?, firstLoop: Int, totalLoops: Int, relayWide: RelayWideShare? = nil,
        ready: Int32? = nil
    ) {
        self.ready = ready
        self.udp = udp
        self.tcp = tcp
        self.firstLoop = firstLoop
        self.totalLoops = totalLoops
        self.relayWide = relayWide
    }

    /// This worker's index among the relay's workers (every worker has as many loops; 0 for a TCP-only worker,
    /// which has no QUIC state of its own to keep).
    package var workerIndex: Int { udp.isEmpty ? 0 : firstLoop / udp.count }

    /// The command-line form `udp=3,4;tcp=5;first=2;total=4;state=6;worker=1;ready=7` (what a parent passes its
    /// worker).
    package var argument: String {
        "udp=" + udp.map(String.init).joined(separator: ",") + (tcp.map { ";tcp=\($0)" } ?? "")
            + ";first=\(firstLoop);total=\(totalLoops)"
            + (relayWide.map { ";state=\($0.descriptor);worker=\($0.worker)" } ?? "")
            + (ready.map { ";ready=\($0)" } ?? "")
    }

    /// Parses `argument`'s form; nil when it is not that.
    package init?(argument: String) {
        var fields: [String: String] = [:]
        for part in argument.split(separator: ";") {
            let pair = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard pair.count == 2 else { return nil }
            fields[String(pair[0])] = String(pair[1])
        }
        guard let udpText = fields["udp"], let first = fields["first"].flatMap({ Int($0) }),
            let total = fields["total"].flatMap({ Int($0) })
        else { return nil }
        let udp = udpText.split(separator: ",").compactMap { Int32($0) }  // empty for a TCP-only relay
        let tcp = fields["tcp"].flatMap { Int32($0) }
        let state = fields["state"].flatMap { Int32($0) }
        let worker = fields["worker"].flatMap { Int($0) }
        let ready = fields["ready"].flatMap { Int32($0) }
        guard fields["ready"] == nil || ready.map({ $0 >= 0 }) == true, !udp.isEmpty || tcp != nil, first >= 0,
            first + udp.count <= total, total <= 256,
            fields["tcp"] == nil || tcp != nil, (fields["state"] == nil) == (fields["worker"] == nil),
            fields["state"] == nil || (state.map { $0 >= 0 } == true && worker.map { $0 >= 0 } == true)
        else { return nil }
        self.init(
            udp: udp, tcp: tcp, firstLoop: first, totalLoops: total,
            relayWide: state.flatMap { state in worker.map { RelayWideShare(descriptor: state, worker: $0) } },
            ready: ready)
    }
}
