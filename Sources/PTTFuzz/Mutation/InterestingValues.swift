import TransportCore

/// The values mutations plant: boundaries where parsers tend to go wrong.
public enum InterestingValues {
    /// (width in bytes, value): zero, one, all ones, sign bits and the varint prefix limits for each width.
    public static let fixedWidth: [(width: Int, value: UInt64)] = [
        (1, 0), (1, 1), (1, 0x3f), (1, 0x40), (1, 0x7f), (1, 0x80), (1, 0xbf), (1, 0xc0), (1, 0xfe), (1, 0xff),
        (2, 0), (2, 0x3fff), (2, 0x4000), (2, 0x7fff), (2, 0x8000), (2, 0xffff), (2, 0x0100),
        (4, 0), (4, 0x3fff_ffff), (4, 0x4000_0000), (4, 0x7fff_ffff), (4, 0x8000_0000), (4, 0xffff_ffff),
        (8, 0), (8, 0x3fff_ffff_ffff_ffff), (8, 0x7fff_ffff_ffff_ffff), (8, 0x8000_0000_0000_0000), (8, .max),
    ]

    /// Variable-length integers: the shortest encodings of the boundary values, and overlong encodings of small
    /// ones (legal varints that some fields must reject, RFC 9000 §12.4).
    public static let varInts: [[UInt8]] =
        ParserSeeds.varInts + [
            [0x40, 0x00], [0x40, 0x3f], [0x80, 0x00, 0x00, 0x01], [0xc0, 0, 0, 0, 0, 0, 0, 0x01],
            [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff], [0xc0], [0x80, 0x00], [0x40],
        ]

    /// `value` as `width` big-endian bytes.
    public static func bigEndian(_ value: UInt64, width: Int) -> [UInt8] {
        (0..<width).map { UInt8(truncatingIfNeeded: value >> UInt64(8 * (width - 1 - $0))) }
    }
}
