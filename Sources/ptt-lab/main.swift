// ptt-lab: the lab's binary — `bench` (connection setup in round trips, relay capacity), `fuzz` (seeded fuzzing of
// the parsers, the CLI and a live relay) and `matrix` (the interop runner's cases on an emulated path). It runs the
// operator's `ptt-transport`, built beside it, as its child relay; nothing here ships in a relay or an app.
import CommandLineSupport
import Dispatch
import Foundation

let usage = """
    ptt-lab — the measurements, fuzzing and interop runs of PTTTransport (the relay itself is ptt-transport)

    \(BenchCommand.usage)
    \(FuzzCommand.usage)
    \(MatrixCommand.usage)
    """

/// Exits 0 on SIGINT/SIGTERM after flushing what was printed.
func installSignalHandlers() -> [DispatchSourceSignal] {
    [SIGINT, SIGTERM].map { signalNumber in
        signal(signalNumber, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
        source.setEventHandler {
            fflush(nil)
            exit(0)
        }
        source.resume()
        return source
    }
}

let signalSources = installSignalHandlers()
var arguments = Array(CommandLine.arguments.dropFirst())
let command = arguments.isEmpty ? "help" : arguments.removeFirst()
do {
    switch command {
    case "bench": try await BenchCommand.run(arguments)
    case "fuzz": try await FuzzCommand.run(arguments)
    case "matrix": try await MatrixCommand.run(arguments)
    case "wake-storm-load": try await WakeStormLoadCommand.run(arguments)  // bench's child: wake-storm's phones
    case "help", "--help", "-h": print(usage)
    default: throw Arguments.Failure(description: "unknown command \(command); try ptt-lab help")
    }
    exit(0)
} catch {
    FileHandle.standardError.write(Data("ptt-lab: \(error)\n".utf8))
    exit(1)
}
