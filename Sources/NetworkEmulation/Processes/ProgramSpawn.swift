internal import CNetworkEmulation
import Glibc
import TransportCore
import TransportIO

/// Starting another program with `posix_spawn`, for the package's tests, benchmark and fuzzer (`ChildProcesses`
/// builds on it). Foundation's `Process` is not used: its `run` crashed a test process now and then.
package enum ProgramSpawn {
    /// Starts `path` with `arguments` and returns its process ID; the caller reaps it (`waitpid`).
    ///
    /// - Parameters:
    ///   - environment: `NAME=value` entries, or nil for this process's environment.
    ///   - directory: its working directory, or nil for this process's.
    ///   - input, output, errors: descriptors that become its 0, 1 and 2; -1 for /dev/null. It inherits no other.
    /// - Throws: `systemCallFailed` with the errno when it cannot be started (a missing program, no processes left).
    package static func start(
        _ path: String, _ arguments: [String], environment: [String]? = nil, directory: String? = nil,
        input: Int32 = -1, output: Int32 = -1, errors: Int32 = -1
    ) throws(TransportError) -> Int32 {
        let argv = CStrings([path] + arguments)
        let envp = environment.map(CStrings.init)
        defer {
            argv.free()
            envp?.free()
        }
        var pid: Int32 = 0
        let rv = ptt_spawn(path, argv.pointers, envp?.pointers, directory, input, output, errors, &pid)
        guard rv == 0 else {
            throw TransportError(
                .systemCallFailed, "cannot start \(path): \(errnoDescription(rv))", libraryCode: Int(rv))
        }
        return pid
    }
}

/// A NULL-terminated array of C strings, freed by `free()`.
struct CStrings {
    let pointers: [UnsafeMutablePointer<CChar>?]

    init(_ strings: [String]) { pointers = strings.map { strdup($0) } + [nil] }

    func free() { for pointer in pointers { Glibc.free(pointer) } }
}
