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
}
