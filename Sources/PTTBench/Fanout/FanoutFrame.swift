/// The benchmark's 80-byte audio frame: a sequence number and the talker's monotonic send time (the talker and
/// the listeners share one process, so one clock), then padding.
struct FanoutFrame: Sendable, Equatable {
    static let size = 80

    var sequence: UInt32
    /// CLOCK_MONOTONIC nanoseconds when the talker handed the frame to its connection.
    var sentAt: UInt64

    /// Big-endian sequence (4 bytes) and send time (8 bytes), then 0x5a padding to `size`.
    var bytes: [UInt8] {
        var bytes = [UInt8](repeating: 0x5a, count: Self.size)
        for index in 0..<4 { bytes[index] = UInt8(truncatingIfNeeded: sequence >> (8 * (3 - index))) }
        for index in 0..<8 { bytes[4 + index] = UInt8(truncatingIfNeeded: sentAt >> (8 * (7 - index))) }
        return bytes
    }

    init(sequence: UInt32, sentAt: UInt64) {
        self.sequence = sequence
        self.sentAt = sentAt
    }

    /// Parses a received frame; nil for anything that is not `size` bytes long.
    init?(_ bytes: [UInt8]) {
        guard bytes.count == Self.size else { return nil }
        sequence = bytes[0..<4].reduce(0) { $0 << 8 | UInt32($1) }
        sentAt = bytes[4..<12].reduce(0) { $0 << 8 | UInt64($1) }
    }
}
