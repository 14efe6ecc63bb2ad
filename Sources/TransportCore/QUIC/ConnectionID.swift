internal import CNgtcp2

/// A QUIC connection ID (0–20 bytes) stored inline, so looking one up per packet allocates nothing.
package struct ConnectionID: Hashable, Sendable, CustomStringConvertible {
    private var head: (UInt64, UInt64) = (0, 0)
    private var tail: UInt32 = 0
    package private(set) var count: Int = 0

    package init<Bytes: Collection>(_ bytes: Bytes) where Bytes.Element == UInt8 {
        precondition(bytes.count <= 20, "a connection ID has at most 20 bytes")
        count = bytes.count
        withUnsafeMutableBytes(of: &head) { raw in
            for (index, byte) in bytes.prefix(16).enumerated() { raw[index] = byte }
        }
        withUnsafeMutableBytes(of: &tail) { raw in
            for (index, byte) in bytes.dropFirst(16).enumerated() { raw[index] = byte }
        }
    }

    init(_ cid: ngtcp2_cid) {
        var cid = cid
        let length = min(Int(cid.datalen), 20)
        self = withUnsafeBytes(of: &cid.data) { ConnectionID($0.prefix(length)) }
    }

    init(pointer: UnsafePointer<UInt8>, length: Int) {
        self.init(UnsafeBufferPointer(start: pointer, count: min(length, 20)))
    }

    package var bytes: [UInt8] {
        var result = [UInt8]()
        result.reserveCapacity(count)
        withUnsafeBytes(of: head) { result.append(contentsOf: $0.prefix(min(count, 16))) }
        if count > 16 { withUnsafeBytes(of: tail) { result.append(contentsOf: $0.prefix(count - 16)) } }
        return result
    }

    /// The ID as ngtcp2 stores it, copied from the inline bytes (no array on the way).
    var ngtcp2: ngtcp2_cid {
        var cid = ngtcp2_cid()
        cid.datalen = count
        withUnsafeMutableBytes(of: &cid.data) { data in
            withUnsafeBytes(of: head) {
                data.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0.prefix(min(count, 16))))
            }
            guard count > 16 else { return }
            withUnsafeBytes(of: tail) {
                UnsafeMutableRawBufferPointer(rebasing: data[16...]).copyMemory(
                    from: UnsafeRawBufferPointer(rebasing: $0.prefix(count - 16)))
            }
        }
        return cid
    }

    /// A fresh random ID of `length` bytes from `random` (the kernel's generator by default).
    package static func random(length: Int = 18, using random: any RandomSource = SystemRandom()) -> ConnectionID {
        ConnectionID(random.bytes(length))
    }

    package static func == (lhs: ConnectionID, rhs: ConnectionID) -> Bool {
        lhs.count == rhs.count && lhs.head.0 == rhs.head.0 && lhs.head.1 == rhs.head.1 && lhs.tail == rhs.tail
    }

    package func hash(into hasher: inout Hasher) {
        hasher.combine(count)
        hasher.combine(head.0)
        hasher.combine(head.1)
        hasher.combine(tail)
    }

    package var description: String { bytes.map { String($0, radix: 16) }.joined() }
}
