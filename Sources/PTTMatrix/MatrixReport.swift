import Foundation

/// The matrix as one table (case × pairing → verdict), then the figure behind each cell; or the same as JSON.
package enum MatrixReport {
    /// The table and, below it, one line per cell with its figure.
    package static func table(_ cells: [MatrixCell]) -> String {
        let pairings = Pairing.allCases.filter { pairing in cells.contains { $0.pairing == pairing } }
        let cases = MatrixCase.allCases.filter { testCase in cells.contains { $0.testCase == testCase } }
        let width = max(20, (cases.map(\.rawValue.count).max() ?? 0) + 2)
        func pad(_ text: String, _ count: Int) -> String {
            text.count >= count ? text : text + String(repeating: " ", count: count - text.count)
        }
        var lines = [pad("case", width) + pairings.map { pad($0.rawValue, 14) }.joined()]
        for testCase in cases {
            let row = pairings.map { pairing in
                pad(cells.first { $0.testCase == testCase && $0.pairing == pairing }?.verdict.rawValue ?? "-", 14)
            }
            lines.append(pad(testCase.rawValue, width) + row.joined())
        }
        lines.append("")
        for cell in cells {
            lines.append(
                "\(cell.testCase.rawValue) \(cell.pairing.rawValue): \(cell.verdict.rawValue) — \(cell.figure)")
        }
        let counts = [Verdict.pass, .fail, .unsupported].map { verdict in
            "\(cells.filter { $0.verdict == verdict }.count) \(verdict.rawValue)"
        }
        lines.append("")
        lines.append(counts.joined(separator: ", "))
        return lines.joined(separator: "\n")
    }

    /// The cells as a JSON array.
    package static func json(_ cells: [MatrixCell]) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        guard let data = try? encoder.encode(cells) else { return "[]" }
        return String(decoding: data, as: UTF8.self)
    }
}
