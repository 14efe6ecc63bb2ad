internal import CNgtcp2

extension PEMData {
    /// Runs `body` with a GnuTLS datum over the PEM bytes (GnuTLS copies what it keeps).
    func withDatum<Result>(_ body: (UnsafePointer<gnutls_datum_t>) -> Result) -> Result {
        var bytes = self.bytes
        return bytes.withUnsafeMutableBufferPointer { buffer in
            var datum = gnutls_datum_t(data: buffer.baseAddress, size: UInt32(buffer.count))
            return body(&datum)
        }
    }
}
