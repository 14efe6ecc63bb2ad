import Glibc
import TransportCore

/// Runs an operator's hook command (`serve --wake-exec CMD`): `/bin/sh -c CMD` with bytes on its standard input,
/// its output discarded, killed at a deadline. Blocking: call it from a thread of its own, never from an event loop
/// or the cooperative pool.
package enum HookProcess {
    /// How a run ended.
    package enum Outcome: Equatable, Sendable {
        /// It exited with this status.
        case exited(Int32)
        /// A signal ended it.
        case signaled(Int32)
        /// It was still running at the deadline and was killed (SIGKILL).
        case timedOut
        /// It could not be started (the reason).
        case notStarted(String)
    }

    /// Runs `command` with `input` on its standard input (closed after the last byte, or when the command stops
    /// reading), standard output and error to /dev/null (the relay opens every descriptor close-on-exec), every signal at its
    /// default, in a process group of its own; waits for it at most `timeout`, then kills the group (the shell and
    /// whatever it started).
    package static func run(shell command: String, input: [UInt8], timeout: Duration) -> Outcome {
        let deadline =
            MonotonicClock.now() &+ UInt64(max(0, timeout.components.seconds)) * 1_000_000_000
            &+ UInt64(max(0, timeout.components.attoseconds) / 1_000_000_000)
        var pair: [Int32] = [-1, -1]
        // A socket pair, not a pipe: the parent writes with MSG_NOSIGNAL, so a hook that exits without reading its
        // input costs an EPIPE, never a SIGPIPE to the relay.
        // SOCK_STREAM is 1 and SOCK_CLOEXEC is O_CLOEXEC on Linux (but MIPS): spelled as numbers because naming
        // SOCK_STREAM in this file makes a release build (whole-module) lose SOCK_DGRAM in AddressResolver.swift
        // (Swift 6.3's importer; the debug build is unaffected).
        let stream: Int32 = 1
        guard socketpair(AF_UNIX, stream | O_CLOEXEC, 0, &pair) == 0 else {
            return .notStarted("socketpair: \(errnoDescription(errno))")
        }
        defer { close(pair[0]) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, pair[1], 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var all = sigset_t()
        var none = sigset_t()
        sigfillset(&all)
        sigemptyset(&none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(
            &attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP))
        let words: [String] = ["/bin/sh", "-c", command]
        let arguments = words.map { strdup($0) } + [nil]
        defer { for argument in arguments { free(argument) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, "/bin/sh", &actions, &attributes, arguments, environ)
        close(pair[1])
        guard spawned == 0 else { return .notStarted("posix_spawn /bin/sh: \(errnoDescription(spawned))") }
        write(input, to: pair[0], until: deadline)
        shutdown(pair[0], Int32(SHUT_WR))
        return wait(for: pid, until: deadline)
    }

    /// Writes `input` until it is all written, the reader is gone, or the deadline passes.
    private static func write(_ input: [UInt8], to fd: Int32, until deadline: UInt64) {
        var offset = 0
        while offset < input.count {
            let now = MonotonicClock.now()
            guard now < deadline else { return }
            var poller = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            let wait = Int32(min(1_000, (deadline - now) / 1_000_000 + 1))
            guard poll(&poller, 1, wait) >= 0 || errno == EINTR else { return }
            guard poller.revents & Int16(POLLOUT) != 0 else {
                if poller.revents & Int16(POLLERR | POLLHUP) != 0 { return }
                continue
            }
            let written = input.withUnsafeBytes { bytes in
                send(fd, bytes.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
            }
            if written > 0 {
                offset += written
            } else if written < 0, errno != EAGAIN, errno != EINTR {
                return  // EPIPE: the hook stopped reading
            }
        }
    }

    /// Waits for `pid` until the deadline (polling every 2 ms), then kills it.
    private static func wait(for pid: pid_t, until deadline: UInt64) -> Outcome {
        var status: Int32 = 0
        while true {
            let done = waitpid(pid, &status, WNOHANG)
            if done == pid { return outcome(status) }
            if done < 0, errno != EINTR { return .notStarted("waitpid: \(errnoDescription(errno))") }
            if MonotonicClock.now() >= deadline {
                kill(-pid, SIGKILL)  // its process group: the shell and whatever it started
                while waitpid(pid, &status, 0) < 0, errno == EINTR {}
                return .timedOut
            }
            _ = poll(nil, 0, 2)
        }
    }

    private static func outcome(_ status: Int32) -> Outcome {
        let signal = status & 0x7f
        return signal == 0 ? .exited((status >> 8) & 0xff) : .signaled(signal)
    }
}
