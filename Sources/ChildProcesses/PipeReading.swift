import Foundation

#if canImport(Glibc)
    import Glibc
#endif

extension FileHandle {
    /// Everything left to read, up to end of file. Unlike Foundation's `readDataToEndOfFile()`, which traps (a
    /// `try!` inside) when a signal interrupts its `read` (EINTR, seen in full test runs), this reads again; any other
    /// error ends the read with what came so far.
    package func readRemainingData() -> Data {
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(fileDescriptor, $0.baseAddress, $0.count) }
            if count > 0 {
                data.append(contentsOf: buffer[0..<count])
            } else if count < 0 && errno == EINTR {
                continue
            } else {
                return data
            }
        }
    }
}
