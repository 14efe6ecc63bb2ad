import Testing
import TransportCore

@testable import PTTTransport

/// The sink a link installs in its next connection's driver (sans-IO): frames go to the link's reader from the
/// loop thread, from one driver only — the first to deliver — with the connection they came from once the link
/// knows it.
@Suite("Link datagram sink")
struct LinkDatagramSinkTests {
    final class Driver {}

    @Test func theFirstDriverToDeliverClaimsTheSink() {
        let delivered = Locked<[([UInt8], TransportConnection.ID?)]>([])
        let sink = LinkDatagramSink { datagram, connection in
            delivered.withLock { $0.append((datagram.payload, connection)) }
        }
        let (winner, loser) = (Driver(), Driver())
        let fromWinner = sink.handler(for: winner)
        let fromLoser = sink.handler(for: loser)
        fromWinner(Datagram(payload: [1]))
        fromLoser(Datagram(payload: [2]))  // the other address, or the race's loser: nothing reaches the reader
        let made = TransportConnection.ID.next()
        sink.attached(made)
        fromWinner(Datagram(payload: [3]))
        fromLoser(Datagram(payload: [4]))
        let seen = delivered.withLock { $0 }
        #expect(seen.map(\.0) == [[1], [3]])
        #expect(seen.map(\.1) == [nil, made], "the connection is named once the link attached it")
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
