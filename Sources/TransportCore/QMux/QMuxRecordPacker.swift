/// Packs encoded frames into records (§3.2) of at most `target` bytes of frames. A single frame larger than
/// `target` (a big DATAGRAM the peer's max_record_size still allows) gets a record of its own.
struct QMuxRecordPacker {
    let target: Int
    private var current: [UInt8] = []
    private(set) var output: [UInt8] = []
    private(set) var framesWritten = 0

    init(target: Int) {
        self.target = target
    }

    /// Bytes still free in the record being filled.
    var room: Int { target - current.count }
    var isCurrentEmpty: Bool { current.isEmpty }

    mutating func add(_ frame: QMuxFrame) {
        var bytes: [UInt8] = []
        frame.encode(into: &bytes)
        if !current.isEmpty && current.count + bytes.count > target { flush() }
        current.append(contentsOf: bytes)
        framesWritten += 1
        if current.count >= target { flush() }
    }

    /// Closes the record being filled (if any).
    mutating func flush() {
        guard !current.isEmpty else { return }
        QMuxRecord.encode(frames: current, into: &output)
        current.removeAll(keepingCapacity: true)
    }

    /// Every record, the last one closed.
    mutating func finish() -> [UInt8] {
        flush()
        defer { output = [] }
        return output
    }
}
