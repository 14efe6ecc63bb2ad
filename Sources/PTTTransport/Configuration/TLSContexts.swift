import TransportCore
import TransportIO

extension ServerConfiguration {
    /// One event loop's TLS context: the key log file opened, the certificate chain and key read from their files
    /// (the core takes bytes and a writer, and opens no file).
    ///
    /// - Throws: `invalidConfiguration` when the key log cannot be opened, a file is missing or unreadable, or the
    ///   chain and key do not load; `systemCallFailed` when the process is out of descriptors.
    func makeTLSContext(
        ticketKey: [UInt8]?, previousTicketKey: [UInt8]?, antiReplayStore: (any ZeroRTTAdmission)?
    ) throws(TransportError) -> TLSServerContext {
        let keyLog = try KeyLogFile.writer(path: connection.keyLogFile)
        return try TLSServerContext(
            certificateChain: PEMFile.read(certificateChain), privateKey: PEMFile.read(privateKey),
            ticketKey: ticketKey, earlyDataWindow: earlyData.windowMilliseconds,
            antiReplayCapacity: earlyData.antiReplayCapacity, previousTicketKey: previousTicketKey, keyLog: keyLog,
            antiReplayStore: antiReplayStore)
    }
}

extension ClientConfiguration {
    /// The TLS context a client's connections share: the key log file opened, the CA file read (the core takes
    /// bytes and a writer, and opens no file).
    ///
    /// - Throws: `invalidConfiguration` when the key log cannot be opened or the trust holds no CA certificate
    ///   that loads; `systemCallFailed` when the process is out of descriptors.
    func makeTLSContext() throws(TransportError) -> TLSClientContext {
        let keyLog = try KeyLogFile.writer(path: connection.keyLogFile)
        return try TLSClientContext(
            trust: trust.anchors(), keyLog: keyLog, priority: tlsPriority ?? TLSPolicy.priority)
    }
}
