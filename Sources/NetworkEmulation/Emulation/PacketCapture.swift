import Glibc
import TransportCore
import TransportIO

/// A pcap file (link type RAW: each record is an IP packet) of everything that enters an emulated path, for
/// tshark: it decrypts QUIC Initial packets by itself (their keys come from the connection ID) and the rest with a
/// key log. Written by the pump thread only.
final class PacketCapture {
    private let fd: Int32

    /// Creates (or truncates) `path` and writes the pcap header.
    init(path: String) throws(TransportError) {
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw TransportError(.systemCallFailed, "cannot create the capture \(path): \(errnoDescription(errno))")
        }
        // magic, version 2.4, GMT offset 0, accuracy 0, snaplen 65535, link type 101 (raw IP); little endian.
        write(
            Self.bytes(UInt32(0xa1b2_c3d4)) + [2, 0, 4, 0] + [UInt8](repeating: 0, count: 8)
                + Self.bytes(UInt32(65_535)) + Self.bytes(UInt32(101)))
    }

    deinit { close(fd) }

    /// Appends `packet`, stamped with the wall clock.
    func record(_ packet: [UInt8]) {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let length = UInt32(packet.count)
        write(
            Self.bytes(UInt32(truncatingIfNeeded: now.tv_sec)) + Self.bytes(UInt32(now.tv_nsec / 1_000))
                + Self.bytes(length) + Self.bytes(length) + packet)
    }

    private func write(_ bytes: [UInt8]) {
        _ = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
    }

    private static func bytes(_ value: UInt32) -> [UInt8] { withUnsafeBytes(of: value.littleEndian, Array.init) }
}
