import ChildProcesses
import TestSupport
import Testing

/// `ChildServer.line(startingWith:within:)`, which the benchmark reads its children's results with: lines a child
/// prints together (one read of the pipe) are each found by their own call, and a line that never comes is nil.
@Suite("A child's lines are found one call each, even when printed together", .integration)
struct ChildServerLineTests {
    @Test func linesPrintedTogetherAreEachFound() async throws {
        let child = try await ChildServer.start(
            "/bin/sh",
            ["-c", "echo 'listening on 127.0.0.1:9'; printf 'noise\\nresult 1\\nclosed 2\\n'; exec sleep 30"])
        defer { child.kill() }
        #expect(child.address == "127.0.0.1:9")
        #expect(await child.line(startingWith: "result ", within: .seconds(10)) == "result 1")
        #expect(await child.line(startingWith: "closed ", within: .seconds(10)) == "closed 2")
        #expect(await child.line(startingWith: "more ", within: .milliseconds(100)) == nil)
    }

    @Test func whatWasNotAskedForIsInTheOutputAtStop() async throws {
        let child = try await ChildServer.start(
            "/bin/sh", ["-c", "echo 'listening on 127.0.0.1:9'; printf 'result 1\\nlater\\n'; exec sleep 1"])
        #expect(await child.line(startingWith: "result ", within: .seconds(10)) == "result 1")
        let stopped = await child.stop()
        #expect(stopped.output.hasPrefix("later\n"), "\(stopped.output)")
    }
}
