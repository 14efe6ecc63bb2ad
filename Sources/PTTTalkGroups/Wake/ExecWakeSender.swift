import Foundation
import PTTTransport
import TransportCore
import TransportIO

/// A `WakeSender` that runs an operator's command once per burst (`ptt-transport serve --wake-exec CMD`): `/bin/sh
/// -c CMD` with one JSON object on its standard input, then end of input; its output is discarded. The command
/// sends the pushes (e.g. calls the app's push gateway); exit status 0 is success.
///
/// The JSON (keys sorted, one line):
///
/// ```json
/// {"burst":"9f3c2a1b0e4d5c67","group":"dispatch","members":[{"platform":"apns","push_token":"80a1…","user":"unit-7"}],
///  "relay":{"port":4433,"server_name":"relay.example"},"talker":"unit-3","ticket":"UFcBAQhkaXNwYXRjaAYI…"}
/// ```
///
/// `burst` is the burst ID in 16 hex digits; `relay` (the relay holding the burst, where the ticket sends the phone)
/// gains `quic_lb_server_id` (hex) when the relay has one; a member last on another relay of a fleet has its name
/// as `last_relay`; `ticket` is the `WakeTicket` in base64url, for the push payload. A burst's second request in a
/// fleet, with members the store named only after its deadline, carries `"late":true` after `group`
/// (`WakeRequest.isLateAddition`).
///
/// Each run happens on a thread of its own, never on an event loop; it is killed (SIGKILL) once it outlasts
/// `timeout`. The relay's `WakeHookPolicy` bounds how many run at once and how many wait.
public struct ExecWakeSender: WakeSender {
    /// The command, as `/bin/sh -c` reads it.
    public let command: String
    /// How long one run may take before it is killed.
    public let timeout: Duration

    /// A sender running `command`, killed after `timeout` (default 5 s).
    public init(command: String, timeout: Duration = .seconds(5)) {
        self.command = command
        self.timeout = timeout
    }

    /// Why a run failed.
    public struct Failure: Error, CustomStringConvertible {
        /// What happened.
        public let description: String
    }

    /// Runs the command with the request's JSON.
    ///
    /// - Throws: `Failure` when it could not start, exited non-zero, was ended by a signal, or outlasted the
    ///   timeout.
    public func wake(_ request: WakeRequest) async throws {
        let input = WakeRequestJSON.encode(request) + [0x0A]
        let (command, timeout) = (command, timeout)
        let outcome = await withCheckedContinuation { continuation in
            let thread = Thread {
                continuation.resume(returning: HookProcess.run(shell: command, input: input, timeout: timeout))
            }
            thread.name = "ptt-wake-exec"
            thread.start()
        }
        switch outcome {
        case .exited(0): return
        case .exited(let status): throw Failure(description: "the wake command exited with status \(status)")
        case .signaled(let signal): throw Failure(description: "the wake command was ended by signal \(signal)")
        case .timedOut: throw Failure(description: "the wake command outlasted \(timeout) and was killed")
        case .notStarted(let reason): throw Failure(description: "the wake command could not start: \(reason)")
        }
    }

    /// The request as the command reads it (one JSON object, keys sorted).
    public static func json(_ request: WakeRequest) -> String {
        String(decoding: WakeRequestJSON.encode(request), as: UTF8.self)
    }
}
