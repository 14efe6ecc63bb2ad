import PTTBench

/// `ptt-transport bench`: see PTTBench.
enum BenchCommand {
    static func run(_ raw: [String]) async throws {
        throw Arguments.Failure(description: "bench is not available in this build yet")
    }
}
