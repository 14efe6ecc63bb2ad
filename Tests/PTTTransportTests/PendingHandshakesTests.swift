import PTTTransport
import Testing
import TransportCore

/// The bookkeeping behind the TCP pending-handshake budget and cap, without sockets.
@Suite("PendingHandshakes")
struct PendingHandshakesTests {
    typealias Table = PendingHandshakes<Int>

    static func source(_ text: String) -> Table.Source { Table.Source(SocketAddress(parsing: text)!) }

    @Test func aSourceAtItsBudgetIsRefusedUntilOneOfItsHandshakesEnds() {
        var table = Table(limit: 100, perSource: 2)
        let a = Self.source("10.0.0.1:1000")
        let b = Self.source("10.0.0.2:1000")
        table.insert(1, source: a)
        table.insert(2, source: a)
        #expect(table.admission(for: a) == .refuse)
        #expect(table.admission(for: b) == .admit)
        table.remove(1)
        #expect(table.admission(for: a) == .admit)
        #expect(table.count(from: a) == 1)
    }

    @Test func atTheCapTheOldestStillPendingMakesRoom() {
        var table = Table(limit: 3, perSource: 100)
        for key in 1...3 { table.insert(key, source: Self.source("10.0.0.\(key):1")) }
        table.remove(1)  // finished its handshake: no longer the oldest
        table.insert(4, source: Self.source("10.0.0.4:1"))
        #expect(table.admission(for: Self.source("10.0.0.9:1")) == .admitAfterEvicting(2))
        table.remove(2)
        table.insert(5, source: Self.source("10.0.0.9:1"))
        #expect(table.admission(for: Self.source("10.0.0.9:1")) == .admitAfterEvicting(3))
        #expect(table.count == 3)
    }

    @Test func ipv6CountsPerSlash64AndMappedIPv4AsIPv4() {
        #expect(Self.source("[2001:db8:1:2::1]:1") == Self.source("[2001:db8:1:2:ffff::9]:2"))
        #expect(Self.source("[2001:db8:1:2::1]:1") != Self.source("[2001:db8:1:3::1]:1"))
        #expect(Self.source("[::ffff:10.0.0.1]:1") == Self.source("10.0.0.1:5"))
        #expect(Self.source("10.0.0.1:1") != Self.source("10.0.0.2:1"))
    }

    @Test func manyShortHandshakesBehindOneLongOneKeepTheOrderBounded() {
        var table = Table(limit: 10, perSource: 10)
        table.insert(0, source: Self.source("10.0.0.1:1"))  // stays pending throughout
        for key in 1...10_000 {
            table.insert(key, source: Self.source("10.0.0.2:1"))
            table.remove(key)
        }
        #expect(table.count == 1)
        #expect(table.orderLength <= 130, "the admission order holds \(table.orderLength) entries for 1 pending")
        for key in 1...9 { table.insert(key, source: Self.source("10.0.0.3:1")) }
        #expect(table.admission(for: Self.source("10.0.0.4:1")) == .admitAfterEvicting(0))
    }
}
