import Testing
import TransportCore

@testable import PTTTransport

/// The sink a link installs in its next connection's driver (sans-IO): frames go to the link's reader from the
/// loop thread, and once the link took a connection, from its driver only, named by it.
@Suite("Link datagram sink")
struct LinkDatagramSinkTests {
    final class Driver {}

    @Test func onceTheLinkTookAConnectionOnlyItsDriverDelivers() {
        let delivered = Locked<[([UInt8], TransportConnection.ID?)]>([])
        let sink = LinkDatagramSink { datagram, connection in
            delivered.withLock { $0.append((datagram.payload, connection)) }
        }
        let (winner, loser) = (Driver(), Driver())
        let fromWinner = sink.handler(for: winner)
        let fromLoser = sink.handler(for: loser)
        fromLoser(Datagram(payload: [1]))  // before the link chose: a race's loser's frame goes through
        fromWinner(Datagram(payload: [2]))
        let made = TransportConnection.ID.next()
        sink.attached(driver: winner, connection: made)
        fromLoser(Datagram(payload: [3]))  // the other address, or the race's loser: dropped from now on
        fromWinner(Datagram(payload: [4]))
        let seen = delivered.withLock { $0 }
        #expect(seen.map(\.0) == [[1], [2], [4]])
        #expect(seen.map(\.1) == [nil, nil, made], "the connection is named once the link attached it")
    }

    @Test func nobodyReadingTheLinkMeansNoSink() {
        let path = LinkDatagramPath(capacity: 4)
        #expect(path.directSink() == nil, "frames stay in the connection until an app reads the link")
        path.want()
        let sink = path.directSink()
        #expect(sink != nil)
        sink?.handler(for: Driver())(Datagram(payload: [7]))
        #expect(path.mailbox.takeAll().map(\.payload) == [[7]])
        #expect(path.statistics.received == 1)
    }
}
