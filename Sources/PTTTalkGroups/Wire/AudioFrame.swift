import TransportCore

/// The header every audio datagram of a talk group starts with, so a listener knows which burst a frame belongs to,
/// where in it, and when it was captured — and can play a caught-up backlog faster than real time, skip silence,
/// and count what it missed. 18 bytes, then the codec's frame (e.g. one 20 ms Opus packet):
///
/// | offset | size | field |
/// |---|---|---|
/// | 0 | 1 | kind: `0xA1` (audio frame, version 1) |
/// | 1 | 1 | flags (bit 0: the talker's last frame of the burst; other bits 0, ignored by readers) |
/// | 2 | 8 | burst ID, big-endian (from the floor grant; never 0) |
/// | 10 | 4 | sequence number, big-endian: 0 for the burst's first frame, then +1 per frame |
/// | 14 | 4 | capture time, big-endian: milliseconds since the burst's first frame was captured |
/// | 18 | ≥ 1 | the codec frame |
public struct AudioFrameHeader: Hashable, Sendable {
    /// The kind byte of an audio frame.
    public static let kind: UInt8 = 0xA1
    /// The header's size in bytes.
    public static let size = 18
    /// `flags` bit: the talker's last frame of the burst.
    public static let lastFrameFlag: UInt8 = 0x01

    /// The burst the frame belongs to (never 0).
    public var burst: UInt64
    /// Its position in the burst: 0 for the first frame.
    public var sequence: UInt32
    /// Milliseconds since the burst's first frame was captured.
    public var captureMilliseconds: UInt32
    /// Flag bits (`lastFrameFlag`).
    public var flags: UInt8

    /// A header.
    public init(burst: UInt64, sequence: UInt32, captureMilliseconds: UInt32, flags: UInt8 = 0) {
        self.burst = burst
        self.sequence = sequence
        self.captureMilliseconds = captureMilliseconds
        self.flags = flags
    }

    /// Reads the header at the start of `datagram`.
    ///
    /// - Throws: `talkGroupMalformed` when the datagram is shorter than a header plus one byte, its kind is not
    ///   `kind`, or its burst ID is 0.
    public init(parsing datagram: [UInt8]) throws(TransportError) {
        guard let header = Self.peek(datagram) else {
            throw WireFields.malformed(
                datagram.count <= Self.size
                    ? "an audio frame is an 18-byte header and at least one byte of audio; got \(datagram.count) bytes"
                    : (datagram[0] != Self.kind
                        ? "an audio frame starts with 0xA1, not 0x\(String(datagram[0], radix: 16))"
                        : "an audio frame's burst ID is never 0"))
        }
        self = header
    }

    /// The header of `datagram`, nil when it is not an audio frame (the relay's per-frame check: no error built).
    static func peek(_ datagram: [UInt8]) -> AudioFrameHeader? {
        guard datagram.count > size, datagram[0] == kind else { return nil }
        return datagram.withUnsafeBufferPointer { bytes -> AudioFrameHeader? in
            let burst = Self.read(bytes, at: 2, count: 8)
            guard burst != 0 else { return nil }
            return AudioFrameHeader(
                burst: burst, sequence: UInt32(Self.read(bytes, at: 10, count: 4)),
                captureMilliseconds: UInt32(Self.read(bytes, at: 14, count: 4)), flags: bytes[1])
        }
    }

    private static func read(_ bytes: UnsafeBufferPointer<UInt8>, at offset: Int, count: Int) -> UInt64 {
        var value: UInt64 = 0
        for index in offset..<(offset + count) { value = value << 8 | UInt64(bytes[index]) }
        return value
    }

    /// The datagram: this header, then `audio` (at least one byte).
    public func frame(_ audio: [UInt8]) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Self.size + audio.count)
        bytes.append(Self.kind)
        bytes.append(flags)
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: burst >> shift)) }
        for shift in stride(from: 24, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: sequence >> shift)) }
        for shift in stride(from: 24, through: 0, by: -8) {
            bytes.append(UInt8(truncatingIfNeeded: captureMilliseconds >> shift))
        }
        bytes.append(contentsOf: audio)
        return bytes
    }
}
