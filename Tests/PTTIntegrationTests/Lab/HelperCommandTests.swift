import Glibc
import TestSupport
import Testing
import TransportCore
import TransportIO

@testable import NetworkEmulation

/// The helper programs of the emulated paths (`ip`, `tc`), run with posix_spawn: output and status come back, a
/// failing program is a clear error naming it, a missing one cannot start.
@Suite("Helper commands (posix_spawn)", .integration)
struct HelperCommandTests {
    @Test func outputOfBothStreamsAndTheStatusComeBack() throws {
        let outcome = try HelperCommand.run("/bin/sh", ["-c", "echo out; echo err >&2; exit 3"])
        #expect(outcome.status == 3)
        #expect(outcome.output == "out\nerr\n")
        #expect(try HelperCommand.succeed("/bin/sh", ["-c", "printf ok"]) == "ok")
    }

    @Test func aFailingProgramIsAnErrorWithItsOutput() {
        let error = #expect(throws: TransportError.self) {
            try HelperCommand.succeed("/bin/sh", ["-c", "echo no such namespace >&2; exit 1"])
        }
        #expect(error?.code == .systemCallFailed)
        #expect(error?.message.contains("failed (status 1): no such namespace") == true, "\(String(describing: error))")
    }

    @Test func aProgramEndedByASignalReportsIt() throws {
        #expect(try HelperCommand.run("/bin/sh", ["-c", "kill -TERM $$"]).status == 128 + 15)
    }

    @Test func theProgramInheritsNoDescriptorButTheStandardOnes() throws {
        let fd = open("/dev/null", O_RDONLY)  // no O_CLOEXEC: a plain fork and exec would pass it on
        defer { close(fd) }
        #expect(fd > 3)
        let listing = try HelperCommand.succeed("/bin/sh", ["-c", "ls /proc/self/fd"])
        #expect(!listing.split(separator: "\n").contains("\(fd)"), "\(listing)")
    }

    @Test func aMissingProgramCannotStart() {
        let error = #expect(throws: TransportError.self) { try HelperCommand.run("/nonexistent/ip", ["netns"]) }
        #expect(error?.code == .systemCallFailed && error?.message.contains("cannot run /nonexistent/ip") == true)
    }

    @Test func outputBeyondTheBufferIsDroppedAndTheProgramStillFinishes() throws {
        let outcome = try HelperCommand.run("/bin/sh", ["-c", "head -c 200000 /dev/zero | tr '\\0' a; exit 0"])
        #expect(outcome.status == 0)
        #expect(outcome.output.utf8.count == 65536 && outcome.output.utf8.allSatisfy { $0 == UInt8(ascii: "a") })
    }
}
