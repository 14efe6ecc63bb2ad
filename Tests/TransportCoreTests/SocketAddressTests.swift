import Glibc
import Testing

@testable import TransportCore

@Suite("Socket addresses")
struct SocketAddressTests {
    @Test(arguments: ["127.0.0.1", "192.0.2.7", "::1", "2001:db8::5"])
    func withPortKeepsTheHostAndChangesOnlyThePort(host: String) throws {
        let address = try #require(SocketAddress(host: host, port: 4433))
        let moved = address.with(port: 9)
        #expect(moved == SocketAddress(host: host, port: 9), "the same bytes as an address made from scratch")
        #expect(moved.port == 9)
        #expect(moved.host == address.host)
        #expect(moved.family == address.family)
    }

    @Test func anUnspecifiedAddressHasNoPortToChange() {
        let none = SocketAddress(host: "not an address", port: 1)
        #expect(none == nil)
    }

    /// An address is 28 bytes of storage (an IPv6 `sockaddr_in6`), not the kernel's 128-byte `sockaddr_storage`: it
    /// is copied several times per packet.
    @Test func anAddressIsNoLargerThanAnIPv6SocketAddress() {
        #expect(MemoryLayout<SocketAddress>.size <= MemoryLayout<sockaddr_in6>.size + MemoryLayout<socklen_t>.size)
    }

    @Test(arguments: ["127.0.0.1", "::1", "2001:db8::5"])
    func aKernelAddressRoundTripsThroughItsStorage(host: String) throws {
        let address = try #require(SocketAddress(host: host, port: 4433))
        var kernel = address.kernelStorage
        let copied = SocketAddress(copying: &kernel, length: address.length)
        #expect(copied == address)
        #expect(copied.description == address.description)
    }

    /// What a kernel or a library could report that is not an IP address (a longer `sockaddr`, a garbage length):
    /// an empty address, as when none was reported, never a crash or a read past the storage.
    @Test(arguments: [29, 110, MemoryLayout<sockaddr_storage>.size, 4096])
    func aLongerAddressThanIPv6IsLeftEmpty(length: Int) {
        let bytes = (0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        let address = bytes.withUnsafeBytes { raw in
            SocketAddress(copying: raw.baseAddress!.assumingMemoryBound(to: UInt8.self), length: socklen_t(length))
        }
        #expect(address.length == 0)
        #expect(address == SocketAddress())
        #expect(address.port == 0)
    }
}
