import Foundation

/// Writes one JSON object per line (keys sorted, so output is stable for tests and tools).
/// One JSON object per line on stdout, keys sorted.
public enum JSONOutput {
    public static func line(_ object: [String: Any]) -> String {
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]),
            let text = String(data: data, encoding: .utf8)
        else { return "{}" }
        return text
    }

    public static func print(_ object: [String: Any]) {
        Swift.print(line(object))
        fflush(nil)
    }
}

/// Milliseconds between two instants of the continuous clock.
/// A duration in milliseconds.
public func milliseconds(_ duration: Duration) -> Double {
    let (seconds, attoseconds) = duration.components
    return Double(seconds) * 1000 + Double(attoseconds) / 1e15
}

/// Rounds to three decimals for printing.
/// Rounded to three decimals.
public func rounded(_ value: Double) -> Double { (value * 1000).rounded() / 1000 }
