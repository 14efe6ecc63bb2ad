import Glibc
import TransportCore

/// How a worker started by an upgrade tells its supervisor that it serves: one byte on its end of a socket pair
/// (a socket, not a pipe: a supervisor that stopped waiting costs the worker an EPIPE, never a SIGPIPE).
package enum WorkerReadiness {
    /// A connected pair: the supervisor keeps `supervisor` and passes `worker` to the worker it starts (then closes
    /// its copy, so the worker's end closing — the worker exited — reads as the end of the stream).
    ///
    /// - Throws: `systemCallFailed` when the process is out of descriptors.
    package static func channel() throws(TransportError) -> (supervisor: Int32, worker: Int32) {
        var pair: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0 else {
            throw TransportError(.systemCallFailed, "a readiness channel for a worker: \(errnoDescription(errno))")
        }
        return (pair[0], pair[1])
    }

    /// In the worker, once it serves: says so and closes the descriptor.
    package static func announce(on fd: Int32) {
        var byte: UInt8 = 1
        _ = send(fd, &byte, 1, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
        close(fd)
    }

    /// How each worker answered on the supervisor's ends `fds`: `.ready` (it wrote its byte), `.ended` (its end
    /// closed without a byte: it exited first) or `.silent` (nothing within `limit`). Blocks the calling thread
    /// for at most `limit`; closes nothing.
    package enum Answer: Equatable, Sendable {
        case ready, ended, silent
    }

    package static func wait(for fds: [Int32], within limit: Duration) -> [Answer] {
        var answers = [Answer](repeating: .silent, count: fds.count)
        let (seconds, attoseconds) = limit.components
        let deadline =
            MonotonicClock.now() &+ UInt64(max(0, seconds)) * 1_000_000_000
            &+ UInt64(max(0, attoseconds) / 1_000_000_000)
        while answers.contains(.silent) {
            let now = MonotonicClock.now()
            guard now < deadline else { break }
            var waiting = fds.indices.filter { answers[$0] == .silent }.map {
                pollfd(fd: fds[$0], events: Int16(POLLIN), revents: 0)
            }
            let slice = Int32(min((deadline - now) / 1_000_000 + 1, 200))
            guard poll(&waiting, nfds_t(waiting.count), slice) > 0 else { continue }
            for entry in waiting where entry.revents != 0 {
                guard let index = fds.firstIndex(of: entry.fd) else { continue }
                var byte: UInt8 = 0
                answers[index] = recv(entry.fd, &byte, 1, Int32(MSG_DONTWAIT)) == 1 ? .ready : .ended
            }
        }
        return answers
    }
}
