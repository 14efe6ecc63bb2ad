internal import CNgtcp2

/// Turns a GnuTLS return code into a `TransportError` that names the call and GnuTLS' own explanation.
func gnutlsCheck(_ rv: Int32, _ what: String, code: TransportError.Code = .tlsFailure) throws(TransportError) {
    guard rv < 0 else { return }
    throw TransportError(code, "\(what) failed: \(gnutlsDescription(rv))", libraryCode: Int(rv))
}

/// GnuTLS' text for an error code (`gnutls_strerror`).
func gnutlsDescription(_ rv: Int32) -> String {
    guard let text = gnutls_strerror(rv) else { return "GnuTLS error \(rv)" }
    return String(cString: text)
}
