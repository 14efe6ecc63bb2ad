internal import CTransportShims
import Glibc
import TransportCore

/// A descriptor inherited from the parent: non-blocking and close-on-exec from here on (a worker's own children
/// must not hold its share of the relay's sockets).
func adoptDescriptor(_ fd: Int32) throws(TransportError) {
    let flags = fcntl(fd, F_GETFL)
    guard flags >= 0, fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0, fcntl(fd, F_SETFD, FD_CLOEXEC) == 0 else {
        throw TransportError(
            .invalidConfiguration, "descriptor \(fd) was not inherited (\(errnoDescription(errno)))")
    }
}

/// The relay's worker processes, seen from the parent that starts and restarts them (`ptt-transport serve
/// --workers N`): each worker gets the parent's sockets as descriptors 3, 4, ... and runs the relay on them.
package enum WorkerProcesses {
    /// Starts `executable` with `arguments` (the first is the program name) and `descriptors` as 3, 4, ...;
    /// returns its pid.
    ///
    /// - Throws: `systemCallFailed` when the descriptors cannot be moved or the program cannot start.
    package static func spawn(
        _ executable: String, _ arguments: [String], descriptors: [Int32]
    ) throws(TransportError) -> Int32 {
        // Copies above every target number first, so moving one to 3 + i never overwrites another still to move.
        var high: [Int32] = []
        defer { for fd in high { close(fd) } }
        for fd in descriptors {
            let copy = fcntl(fd, F_DUPFD_CLOEXEC, Int32(3 + descriptors.count + 64))
            guard copy >= 0 else {
                throw TransportError(.systemCallFailed, "dup of descriptor \(fd): \(errnoDescription(errno))")
            }
            high.append(copy)
        }
        var pid: Int32 = 0
        let cArguments = arguments.map { strdup($0) } + [nil]
        defer { for argument in cArguments { free(argument) } }
        let rv = high.withUnsafeBufferPointer { fds in
            ptt_spawn_worker(executable, cArguments, fds.baseAddress, Int32(fds.count), &pid)
        }
        guard rv == 0 else {
            throw TransportError(.systemCallFailed, "starting a worker (\(executable)): \(errnoDescription(rv))")
        }
        return pid
    }

    /// Blocks until one child ends; returns its pid and how it ended (`exit N` or `signal N`), nil when there is
    /// no child left.
    package static func waitForAnyChild() -> (pid: Int32, ending: String)? {
        var status: Int32 = 0
        while true {
            let pid = waitpid(-1, &status, 0)
            if pid > 0 {
                let signal = status & 0x7f
                return (pid, signal == 0 ? "exit \((status >> 8) & 0xff)" : "signal \(signal)")
            }
            if errno != EINTR { return nil }
        }
    }

    /// In a worker: dies with the parent (SIGKILL when it ends); false when the parent is gone already.
    package static func dieWithParent(_ parent: Int32) -> Bool { ptt_die_with_parent(parent) == 0 }
}
