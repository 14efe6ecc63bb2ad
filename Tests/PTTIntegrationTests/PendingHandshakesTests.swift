import PTTTransport
import TestSupport
import Testing
import TransportCore

/// The bookkeeping behind the TCP pending-handshake budget and cap, without sockets.
@Suite("PendingHandshakes", .integration)
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
        for key in 1...9 { table.insert(key, source: Self.source("10.0.1.\(key):1")) }  // one each: the oldest goes
        #expect(table.admission(for: Self.source("10.0.0.4:1")) == .admitAfterEvicting(0))
    }

    /// Issue 21, item 12: silent connections from several sources, each inside its budget, keep the table full; a
    /// slow real client (one handshake pending) is never the one evicted while some source holds more than one.
    @Test func atTheCapTheHeaviestSourceMakesRoomNotTheSlowClient() {
        var table = Table(limit: 16, perSource: 8)
        let client = Self.source("192.0.2.7:1")
        var next = 0
        func arrive(_ source: Table.Source) {
            next += 1
            if case .admitAfterEvicting(let victim) = table.admission(for: source) { table.remove(victim) }
            if table.admission(for: source) != .refuse { table.insert(next, source: source) }
        }
        for index in 0..<15 { arrive(Self.source("10.0.0.\(index % 5):1")) }
        arrive(client)
        let clientKey = next
        // Ten attacking sources for 16 slots (the flood: 160 sources for 1,024): some always hold two.
        for round in 0..<2_000 { arrive(Self.source("10.0.0.\(round % 10):1")) }
        #expect(table.contains(clientKey), "the slow client's handshake was evicted")
        #expect(table.count == 16)
    }

    @Test func theOldestOfTheHeaviestSourceGoesFirst() {
        var table = Table(limit: 5, perSource: 10)
        let (a, b) = (Self.source("10.0.0.1:1"), Self.source("10.0.0.2:1"))
        table.insert(1, source: b)
        table.insert(2, source: a)
        table.insert(3, source: a)
        table.insert(4, source: Self.source("10.0.0.3:1"))
        table.insert(5, source: a)
        #expect(table.admission(for: b) == .admitAfterEvicting(2), "a holds three: its oldest goes, not 1")
        table.remove(2)
        table.remove(3)
        table.insert(6, source: b)
        table.insert(7, source: a)  // a and b hold two each: the older of their oldest goes
        #expect(table.admission(for: Self.source("10.0.0.9:1")) == .admitAfterEvicting(1))
    }
}
