/// A failure of the fuzzer itself (not a finding): a relay that does not start, a capture that fails.
public struct FuzzError: Error, CustomStringConvertible {
    /// What went wrong.
    public let description: String
    init(_ description: String) { self.description = description }
}
