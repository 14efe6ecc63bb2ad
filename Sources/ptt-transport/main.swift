// ptt-transport: the operator's binary — `serve` (a relay), `connect` (a client probe) and `--version`. It is built
// from the library targets only; the lab's commands (bench, fuzz, matrix) are `ptt-lab`'s. It holds no transport
// logic of its own.
import CommandLineSupport
import Dispatch
import Foundation
import PTTTransport

let usage = """
    ptt-transport — push-to-talk transport over QUIC (ngtcp2 + GnuTLS) with a QMux/TCP fallback

    ptt-transport --version    prints the linked ngtcp2 and GnuTLS versions and their safety checks (GnuTLS:
                               0-RTT and CVE-2025-6395; ngtcp2: qlog)

    \(ServeCommand.usage)
    \(ConnectCommand.usage)

    The benchmark, the fuzzer and the interop matrix are in the lab's binary: ptt-lab help
    """

/// Exits 0 on SIGINT/SIGTERM (after the process printed what it had); a first SIGTERM runs the command's
/// `GracefulStop` instead when it set one (`serve` drains), and the command then ends by itself. SIGHUP runs the
/// command's `SignalAction.hangupReload` (`serve` reloads its certificate and secrets) and is otherwise ignored;
/// SIGUSR2 runs `SignalAction.upgrade` (the supervisor of `serve --workers` upgrades in place), else ignored.
func installSignalHandlers() -> [DispatchSourceSignal] {
    signal(SIGHUP, SIG_IGN)  // ignored until a command sets a `SignalAction` (which watches it then)
    signal(SIGUSR2, SIG_IGN)
    return [SIGINT, SIGTERM].map { signalNumber in
        signal(signalNumber, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
        source.setEventHandler {
            if signalNumber == SIGTERM, let stop = GracefulStop.take() {
                Task { await stop() }
                return
            }
            if RelayLog.serving { RelayLog.info("stop", ["signal": signalNumber == SIGINT ? "SIGINT" : "SIGTERM"]) }
            fflush(nil)
            exit(0)
        }
        source.resume()
        return source
    }
}

_ = ProcessClock.started  // the talk-group phone's times count from here
let signalSources = installSignalHandlers()
var arguments = Array(CommandLine.arguments.dropFirst())
let command = arguments.isEmpty ? "help" : arguments.removeFirst()
do {
    switch command {
    case "serve": try await ServeCommand.run(arguments)
    case "connect": try await ConnectCommand.run(arguments)
    case "bench", "fuzz", "matrix":
        throw Arguments.Failure(description: "\(command) is in the lab's binary now: ptt-lab \(command)")
    case "help", "--help", "-h": print(usage)
    case "version", "--version":
        print("ptt-transport (\(LinkedLibraries.summary))")
        for check in LinkedLibraries.checks { print(check) }
    default: throw Arguments.Failure(description: "unknown command \(command); try ptt-transport help")
    }
    exit(0)
} catch {
    if RelayLog.serving {
        RelayLog.error("fatal", ["message": "\(error)"])
    } else {
        FileHandle.standardError.write(Data("ptt-transport: \(error)\n".utf8))
    }
    exit(1)
}
