/// One way of changing an input. Each keeps the rest of the input as it was, so a mutation of a valid encoding
/// stays close to valid and reaches deep into a parser.
public enum Mutation: String, CaseIterable, Sendable {
    /// Flips exactly one bit.
    case flipBit
    /// Sets one byte to a different value.
    case setByte
    /// Cuts the input to a shorter prefix.
    case truncate
    /// Appends 1–32 random bytes.
    case extend
    /// Keeps a prefix of the input and continues with a suffix of another input (the donor).
    case splice
    /// Overwrites 1, 2, 4 or 8 bytes with a boundary value (0, all ones, sign bits, varint limits), big-endian.
    case interestingValue
    /// Writes a QUIC variable-length integer at a length boundary (or an overlong encoding) at some position.
    case varIntBoundary
    /// Repeats a range of the input right after itself.
    case duplicateRange
    /// Deletes a range of the input.
    case removeRange
}
