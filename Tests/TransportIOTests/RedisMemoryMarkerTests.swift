import Testing
import TransportCore

@testable import TransportIO

/// The memory marker decisions on the replies Redis 7.0.15 really sends (`INFO replication` captured with a socket).
@Suite("Redis memory marker")
struct RedisMemoryMarkerTests {
    static let replid = "e6365efca6794266a157395eaefce771a8e2598d"
    static func info(role: String = "master", replid: String = replid) -> RESPValue {
        .bulk(
            Array(
                ("# Replication\r\nrole:\(role)\r\nconnected_slaves:0\r\nmaster_failover_state:no-failover\r\n"
                    + "master_replid:\(replid)\r\nmaster_replid2:0000000000000000000000000000000000000000\r\n"
                    + "master_repl_offset:0\r\nsecond_repl_offset:-1\r\nrepl_backlog_active:0\r\n"
                    + "repl_backlog_size:1048576\r\nrepl_backlog_first_byte_offset:0\r\nrepl_backlog_histlen:0\r\n")
                    .utf8
            ))
    }

    @Test func aMarkerOfTheSameMemoryIsKept() throws {
        let marker = RESPValue.bulk(Array("1795659737063 \(Self.replid)".utf8))
        let (start, write) = try RedisMemoryMarker.start(
            fromReplies: [marker, Self.info()], prefix: "p:", nowMilliseconds: 1_795_700_000_000)
        #expect(start == 1_795_659_737_063)
        #expect(write == nil)
    }

    /// Redis restarted empty (no marker) or another memory (a promoted replica, a restart without RDB): a new
    /// marker at now, so tickets issued before are refused 0-RTT.
    @Test(arguments: [RESPValue.bulk(nil), .bulk(Array("1795659737063 0123456789abcdef".utf8)), .bulk([0x78])])
    func aLostMemoryStartsAgainNow(marker: RESPValue) throws {
        let (start, write) = try RedisMemoryMarker.start(
            fromReplies: [marker, Self.info()], prefix: "p:", nowMilliseconds: 1_795_700_000_000)
        #expect(start == 1_795_700_000_000)
        #expect(write == ["SET", "p:memory", "1795700000000 \(Self.replid)"])
    }

    @Test func aReplicaOrAnErrorFailsClosed() {
        #expect(throws: TransportError.self) {
            _ = try RedisMemoryMarker.start(
                fromReplies: [.bulk(nil), Self.info(role: "slave")], prefix: "p:", nowMilliseconds: 1)
        }
        #expect(throws: TransportError.self) {
            _ = try RedisMemoryMarker.start(
                fromReplies: [.error("LOADING Redis is loading the dataset in memory"), Self.info()], prefix: "p:",
                nowMilliseconds: 1)
        }
        #expect(throws: TransportError.self) {
            _ = try RedisMemoryMarker.start(fromReplies: [.bulk(nil), .integer(1)], prefix: "p:", nowMilliseconds: 1)
        }
    }
}
