extension Array where Element == UInt8 {
    /// The bytes from `start` on, then `bytes`, in a new array of exactly that size. What a reassembly buffer (TLS
    /// input, QMux records) does on each read: it holds one partial record between reads, never the capacity of an
    /// earlier burst (issue 31, item 11).
    package func remainder(from start: Int, appending bytes: some Collection<UInt8>) -> [UInt8] {
        var next: [UInt8] = []
        next.reserveCapacity(count - start + bytes.count)
        next.append(contentsOf: self[start...])
        next.append(contentsOf: bytes)
        return next
    }
}
