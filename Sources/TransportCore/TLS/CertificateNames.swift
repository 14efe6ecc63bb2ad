internal import CNgtcp2

/// The DNS names a PEM certificate is issued for (its subjectAltName entries), read with GnuTLS.
package enum CertificateNames {
    /// The DNS names of the first certificate in `pem`, in the order the certificate lists them.
    ///
    /// - Throws: `invalidConfiguration` when `pem` holds no certificate GnuTLS can parse.
    package static func dnsNames(of pem: PEMData) throws(TransportError) -> [String] {
        var certificate: gnutls_x509_crt_t?
        try gnutlsCheck(gnutls_x509_crt_init(&certificate), "creating a certificate")
        guard let certificate else { throw TransportError(.internalError, "GnuTLS returned no certificate") }
        defer { gnutls_x509_crt_deinit(certificate) }
        let imported = pem.withDatum { gnutls_x509_crt_import(certificate, $0, GNUTLS_X509_FMT_PEM) }
        guard imported == 0 else {
            throw TransportError(
                .invalidConfiguration, "\(pem.origin) holds no certificate GnuTLS can read",
                libraryCode: Int(imported))
        }
        var names: [String] = []
        var buffer = [UInt8](repeating: 0, count: 1024)
        for sequence in 0..<UInt32(64) {
            var size = buffer.count
            let type = buffer.withUnsafeMutableBytes { bytes in
                gnutls_x509_crt_get_subject_alt_name(certificate, sequence, bytes.baseAddress, &size, nil)
            }
            if type == GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE { break }
            guard type >= 0 else { continue }  // too long for the buffer or unparsable: not a usable name
            if type == Int32(GNUTLS_SAN_DNSNAME.rawValue) {
                names.append(String(decoding: buffer[0..<min(size, buffer.count)], as: UTF8.self))
            }
        }
        return names
    }
}
