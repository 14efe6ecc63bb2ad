import Testing

@testable import TransportCore

/// What the core reports of the libraries it links against (the qlog guard that reads dpkg's status file is
/// PTTTransport's `QlogSafety`, tested in `QlogSafetyTests`).
@Suite("Linked ngtcp2 version check")
struct LinkedNgtcp2Tests {
    @Test func theRunningLibrariesNameTheirVersions() {
        #expect(LinkedNgtcp2.version.split(separator: ".").count == 3, "\(LinkedNgtcp2.version)")
        #expect(LinkedNgtcp2.gnutlsVersion.hasPrefix("3."), "\(LinkedNgtcp2.gnutlsVersion)")
        // The library that runs is the one whose headers the build compiled against (pkg-config chose both; the
        // 1.11 build's rpath must win over the system's 0.12.1).
        #expect(LinkedNgtcp2.version == LinkedNgtcp2.headerVersion)
        #expect(LinkedNgtcp2.has(.retiresTwice) == (LinkedNgtcp2.versionNumber < 0x01_04_00))
        #expect(LinkedNgtcp2.has(.pacesWithInitialRTT) == LinkedNgtcp2.version.hasPrefix("0."))
    }
}
