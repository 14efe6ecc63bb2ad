import Foundation
import PTTTalkGroups
import Testing

/// The floor server's documentation holds: the transition table in FloorControlAndLiveness.md names one test per
/// row, each a test of `FloorServerTransitionTests`, and every such test is a row; values print in TS 24.380's words.
@Suite("Floor server documentation")
struct FloorServerDocumentationTests {
    /// The repository's root, from this file's path.
    static let root: String = {
        var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast(4)  // Tests/PTTTransportTests/FloorServer/<file>
        return parts.joined(separator: "/")
    }()

    static func contents(_ path: String) throws -> String {
        try String(contentsOfFile: root + "/" + path, encoding: .utf8)
    }

    @Test func everyRowOfTheTransitionTableHasItsTestAndEveryTestItsRow() throws {
        let article = try Self.contents("Sources/PTTTalkGroups/PTTTalkGroups.docc/FloorControlAndLiveness.md")
        let tests = try Self.contents("Tests/PTTTransportTests/FloorServer/FloorServerTransitionTests.swift")
        // The table: from its header to the first line that is not a row; its last column a test name in backticks.
        let lines = article.split(separator: "\n", omittingEmptySubsequences: false)
        let header = try #require(lines.firstIndex { $0.hasPrefix("| state | event (TS 24.380) |") })
        let rows = lines[(header + 2)...].prefix { $0.hasPrefix("|") }
        let named = rows.compactMap { row -> String? in
            let cells = row.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count == 4, let last = cells.last, last.hasPrefix("`"), last.hasSuffix("`") else { return nil }
            return String(last.dropFirst().dropLast())
        }
        let defined = tests.split(separator: "\n").compactMap { line -> String? in
            let text = line.trimmingCharacters(in: .whitespaces)
            guard text.hasPrefix("@Test func ") else { return nil }
            return String(text.dropFirst("@Test func ".count).prefix { $0 != "(" })
        }
        #expect(named.count == rows.count && named.count >= 38, "every row names its test")
        #expect(Set(named).count == named.count, "one row per test")
        #expect(
            Set(named) == Set(defined),
            "rows without a test: \(Set(named).subtracting(defined)); tests without a row: \(Set(defined).subtracting(named))"
        )
    }

    @Test func valuesPrintInTheSpecificationsWords() {
        #expect("\(FloorDenyCause.queueFull)" == "#7 queue full")
        #expect("\(FloorRevokeCause.preempted)" == "#4 media burst pre-empted")
        #expect("\(FloorUrgency.imminentPeril)" == "imminent peril")
        #expect("\(NamedFloor.State.pendingFloorRevoke)" == "G: pending Floor Revoke")
        #expect("\(NamedFloor.ParticipantState.permitted)" == "U: permitted")
        #expect(
            "\(NamedFloor.Message.taken(by: "alice", urgency: .emergency, mayRequest: true))"
                == "Floor Taken by alice (emergency)")
        #expect("\(NamedFloor.ReleaseReason.preempted(by: "dispatch"))" == "pre-empted by dispatch")
        #expect("\(NamedFloor.Message.deny(.retryAfter(.seconds(2))))" == "Floor Deny #4 retry after 2.0 seconds")
    }
}
