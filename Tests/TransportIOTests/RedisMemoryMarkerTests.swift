import Testing
import TransportCore

@testable import TransportIO

/// The memory marker decisions on the replies Redis 7.0.15 really sends (`INFO server` and `INFO replication`
/// captured with a socket).
@Suite("Redis memory marker")
struct RedisMemoryMarkerTests {
    static let runID = "c03b886b65847ccb32613a779f60762167e4ed02"
    static let replid = "e6365efca6794266a157395eaefce771a8e2598d"
    static let server = RESPValue.bulk(
        Array(
            ("# Server\r\nredis_version:7.0.15\r\nredis_git_sha1:00000000\r\nredis_git_dirty:0\r\n"
                + "redis_build_id:ae4d7c971a948f0\r\nredis_mode:standalone\r\nos:Linux 6.18.44-fc-v669 x86_64\r\n"
                + "arch_bits:64\r\nmonotonic_clock:POSIX clock_gettime\r\nmultiplexing_api:epoll\r\n"
                + "atomicvar_api:c11-builtin\r\ngcc_version:12.2.0\r\nprocess_id:2283\r\nprocess_supervised:no\r\n"
                + "run_id:\(runID)\r\ntcp_port:26396\r\nserver_time_usec:1795660880196933\r\n"
                + "uptime_in_seconds:1\r\nuptime_in_days:0\r\nhz:10\r\nconfigured_hz:10\r\nlru_clock:498768\r\n"
                + "executable:/usr/bin/redis-server\r\nconfig_file:\r\nio_threads_active:0\r\n\r\n").utf8))
    static func info(role: String = "master") -> RESPValue {
        .bulk(
            Array(
                ("# Replication\r\nrole:\(role)\r\nconnected_slaves:0\r\nmaster_failover_state:no-failover\r\n"
                    + "master_replid:\(replid)\r\nmaster_replid2:0000000000000000000000000000000000000000\r\n"
                    + "master_repl_offset:0\r\nsecond_repl_offset:-1\r\nrepl_backlog_active:0\r\n"
                    + "repl_backlog_size:1048576\r\nrepl_backlog_first_byte_offset:0\r\nrepl_backlog_histlen:0\r\n")
                    .utf8
            ))
    }

    @Test func aMarkerOfTheSameProcessIsKept() throws {
        let marker = RESPValue.bulk(Array("1795659737063 \(Self.runID)".utf8))
        let (start, write) = try RedisMemoryMarker.start(
            fromReplies: [marker, Self.server, Self.info()], prefix: "p:", nowMilliseconds: 1_795_700_000_000)
        #expect(start == 1_795_659_737_063)
        #expect(write == nil)
    }

    /// Redis restarted empty (no marker) or another process (a restart, a promoted replica): a new marker at now,
    /// so tickets issued before are refused 0-RTT.
    @Test(arguments: [RESPValue.bulk(nil), .bulk(Array("1795659737063 0123456789abcdef".utf8)), .bulk([0x78])])
    func aLostMemoryStartsAgainNow(marker: RESPValue) throws {
        let (start, write) = try RedisMemoryMarker.start(
            fromReplies: [marker, Self.server, Self.info()], prefix: "p:", nowMilliseconds: 1_795_700_000_000)
        #expect(start == 1_795_700_000_000)
        #expect(write == ["SET", "p:memory", "1795700000000 \(Self.runID)"])
    }

    @Test func aReplicaOrAnErrorFailsClosed() {
        #expect(throws: TransportError.self) {
            _ = try RedisMemoryMarker.start(
                fromReplies: [.bulk(nil), Self.server, Self.info(role: "slave")], prefix: "p:", nowMilliseconds: 1)
        }
        #expect(throws: TransportError.self) {
            _ = try RedisMemoryMarker.start(
                fromReplies: [.error("LOADING Redis is loading the dataset in memory"), Self.server, Self.info()],
                prefix: "p:",
                nowMilliseconds: 1)
        }
        #expect(throws: TransportError.self) {
            _ = try RedisMemoryMarker.start(
                fromReplies: [.bulk(nil), Self.server, .integer(1)], prefix: "p:", nowMilliseconds: 1)
        }
    }
}
