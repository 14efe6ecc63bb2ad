import Glibc
import TransportCore
import TransportIO

/// Remembers the input being fed to an in-process parser, so that a trap (SIGILL, SIGTRAP), abort (SIGABRT) or
/// bad access (SIGSEGV, SIGBUS) prints the target and the input in hex to stderr before the process dies. The
/// handler then restores the previous handler (the Swift runtime's backtracer) and returns, so the fault is
/// raised again and reported and ended as usual.
///
/// One fuzz run per process owns the witness at a time (`withOwnership`); runs that overlap it (tests run
/// several at once) are not witnessed, so the handler's state is never written by two threads.
enum CrashWitness {
    /// Whether the current task's fuzz run owns the witness.
    @TaskLocal static var owned = false
    private static let claimed = Locked(false)

    static let capacity = 4096
    private static let signals: [Int32] = [SIGILL, SIGTRAP, SIGABRT, SIGSEGV, SIGBUS, SIGFPE]
    // Invariant: allocated once in `install` before any input is recorded, never freed; written only by the
    // owning run (`owned`) between inputs, read only by the signal handler, which runs during an input.
    nonisolated(unsafe) private static var input = UnsafeMutablePointer<UInt8>.allocate(capacity: capacity)
    // Invariant: as `input`: the fuzzing thread writes it between inputs, the handler on that thread reads it.
    nonisolated(unsafe) private static var inputLength = 0
    // Invariant: as `input`; a NUL-terminated copy of the current target's name.
    nonisolated(unsafe) private static var target = UnsafeMutablePointer<CChar>.allocate(capacity: 64)
    // Invariant: written once per signal in `install` (before any input), read by the handler.
    nonisolated(unsafe) private static var previous: UnsafeMutablePointer<sigaction> = {
        let table = UnsafeMutablePointer<sigaction>.allocate(capacity: 32)
        table.initialize(repeating: .init(), count: 32)
        return table
    }()
    private static let installed = Locked(false)
    // Invariant: written by the runner's task when the child relay starts and stops, before and after the
    // inputs it could interrupt (task order makes the write visible); read only by the handler.
    nonisolated(unsafe) private static var childToKill: pid_t = 0

    /// Installs the handlers (once per process).
    static func install() {
        let first = installed.withLock { done -> Bool in
            defer { done = true }
            return !done
        }
        guard first else { return }
        target[0] = 0
        for number in signals {
            var action: sigaction = .init()
            action.__sigaction_handler.sa_handler = { number in CrashWitness.report(number) }
            sigemptyset(&action.sa_mask)
            action.sa_flags = 0
            sigaction(number, &action, previous + Int(number))
        }
    }

    /// Runs `body` as the witnessed run if no other run owns the witness now; unwitnessed otherwise.
    static func withOwnership<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        let mine = claimed.withLock { claimed -> Bool in
            defer { claimed = true }
            return !claimed
        }
        guard mine else { return try await body() }
        defer { claimed.withLock { $0 = false } }
        return try await $owned.withValue(true) { try await body() }
    }

    /// A child process (the relay) to SIGKILL if this process crashes (0: none). Only the owning run sets it.
    static func killOnCrash(_ pid: pid_t) {
        guard owned else { return }
        childToKill = pid
    }

    /// Records the input about to be fed to `name` (only in the owning run).
    static func record(target name: String, input bytes: [UInt8]) {
        guard owned else { return }
        let count = min(bytes.count, capacity)
        bytes.withUnsafeBufferPointer { source in
            if count > 0 { input.update(from: source.baseAddress!, count: count) }
        }
        inputLength = count
        var index = 0
        for byte in name.utf8.prefix(63) {
            target[index] = CChar(bitPattern: byte)
            index += 1
        }
        target[index] = 0
    }

    /// Runs in the signal handler: async-signal-safe calls only (write, kill, sigaction).
    private static func report(_ number: Int32) {
        emit("\nptt-lab fuzz: CRASH (signal ")
        emitNumber(Int(number))
        emit(") in target ")
        _ = write(2, target, strlen(target))
        emit(", input (")
        emitNumber(inputLength)
        emit(" bytes) hex: ")
        let digits: StaticString = "0123456789abcdef"
        var pair: (UInt8, UInt8) = (0, 0)
        for index in 0..<inputLength {
            let byte = input[index]
            pair = (digits.utf8Start[Int(byte >> 4)], digits.utf8Start[Int(byte & 0x0f)])
            withUnsafeBytes(of: &pair) { _ = write(2, $0.baseAddress, 2) }
        }
        emit("\n")
        if childToKill > 0 { kill(childToKill, SIGKILL) }
        sigaction(number, previous + Int(number), nil)
    }

    private static func emit(_ text: StaticString) {
        _ = write(2, text.utf8Start, text.utf8CodeUnitCount)
    }

    private static func emitNumber(_ value: Int) {
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes on the stack: no allocation in a handler
        withUnsafeMutableBytes(of: &digits) { buffer in
            var remaining = value
            var index = buffer.count
            repeat {
                index -= 1
                buffer[index] = UInt8(48 + remaining % 10)
                remaining /= 10
            } while remaining > 0 && index > 0
            _ = write(2, buffer.baseAddress! + index, buffer.count - index)
        }
    }
}
