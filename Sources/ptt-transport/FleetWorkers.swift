import CommandLineSupport
import PTTTransport

/// `serve --talk-groups --fleet --workers N`: each worker is a relay of the fleet of its own, named `ID#INDEX.PID`,
/// with a trunk listener of its own at `--trunk-listen HOST:PORT+INDEX` (port 0: one the kernel picks, published
/// once bound). INDEX is the worker's slot: 0 to N-1 for the first generation, N to 2N-1 for the one an in-place
/// upgrade (SIGUSR2) starts beside it, and so on alternately (`WorkerSlots`), so two generations never share a port.
/// A trunk does not share the `--listen` port with workers: the steering program places its Initial packets among
/// the serving generation's sockets, so a dialer would have to know the host's workers and generation to reach one.
enum FleetWorkers {
    /// This process's place among the workers: nil without `--workers`; `index` nil in the supervisor.
    struct Place {
        var index: Int?
        var count: Int
    }

    /// The place from the command line (nil without `--workers`), after checking `--trunk-listen` fits it.
    ///
    /// - Throws: `Arguments.Failure` without `--trunk-listen`, or when its ports (both generations') would pass 65535.
    static func place(_ args: Arguments) throws -> Place? {
        guard args.value("workers") != nil else { return nil }
        let count = try args.integer("workers", default: 1)
        guard let listen = args.value("trunk-listen") else {
            throw Arguments.Failure(
                description:
                    "--fleet with --workers needs --trunk-listen HOST:PORT (worker i listens for trunks on PORT+i): "
                    + "a trunk dialed to the shared --listen port would land on any worker")
        }
        if let address = ServerAddress(listen), address.port != 0, Int(address.port) + 2 * count - 1 > 65535 {
            throw Arguments.Failure(
                description: "--trunk-listen \(listen): PORT + 2 × --workers - 1 passes 65535 (an in-place upgrade's "
                    + "workers listen beside the serving ones)")
        }
        let index = args.value("worker-sockets").flatMap(InheritedSockets.init(argument:))?.workerIndex
        return Place(index: index, count: count)
    }

    /// The trunk listener of worker `index`: `listen`'s port plus the index (port 0 stays 0).
    static func trunkListen(_ listen: String, worker index: Int) -> String {
        guard var address = ServerAddress(listen), address.port != 0 else { return listen }
        address.port += UInt16(index)
        return address.description
    }

    /// The fleet name of worker `index` of the relay named `name`, in the process `pid`: `NAME#INDEX.PID`. A worker
    /// the supervisor restarts (100 ms after it died) is a new relay of the fleet, not the dead one back under its
    /// name: the other relays see the dead one leave the store within a lifetime, close their trunks to it and
    /// re-home its groups, where under the same name they would keep sending its groups' floor requests on trunks
    /// to a dead process until QUIC's idle timeout.
    static func relayName(_ name: String, worker index: Int, pid: Int32) -> String { "\(name)#\(index).\(pid)" }

    /// The longest `relayName(_:worker:pid:)` can make of `name` (the most workers, Linux's largest PID).
    static func longestRelayName(_ name: String) -> String { relayName(name, worker: 63, pid: 4_194_304) }
}
