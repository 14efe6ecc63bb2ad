import Foundation
import Glibc
import TestSupport
import Testing

@testable import TransportCore
@testable import TransportIO

/// The `--workers` supervisor's GET of its workers' endpoints (`AdminHTTPClient`) fed garbage by a raw loopback
/// server: every answer that is not HTTP, a silent peer and a closed port give nil (the supervisor reports that worker
/// not ready), never a crash or a wait past the timeout; a real answer parses.
@Suite(.serialized, .integration) struct AdminHTTPClientTests {
    /// A listener on 127.0.0.1 that answers each of `answers` in turn (nil: says nothing, holds the connection
    /// until the client gives up) and closes.
    static func serve(_ answers: [[UInt8]?]) throws -> (SocketAddress, Thread) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && listen(fd, 16) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        try #require(bound)
        let port = UInt16(bigEndian: address.sin_port)
        let thread = Thread {
            for answer in answers {
                let client = accept(fd, nil, nil)
                guard client >= 0 else { break }
                var buffer = [UInt8](repeating: 0, count: 4096)
                _ = recv(client, &buffer, buffer.count, 0)
                if let answer {
                    _ = answer.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                } else {
                    _ = recv(client, &buffer, buffer.count, 0)  // until the client closes
                }
                close(client)
            }
            close(fd)
        }
        thread.start()
        return (try #require(SocketAddress(host: "127.0.0.1", port: port)), thread)
    }

    @Test func garbageAnswersAreNilAndARealOneParses() throws {
        var generator = SystemRandomNumberGenerator()
        let garbage: [[UInt8]?] = [
            [], Array("hello\r\n\r\n".utf8), Array("HTTP/1.1 \r\n\r\n".utf8), Array("HTTP/1.1 200 OK\r\nno end".utf8),
            Array("HTTP/2 200\r\n\r\nx".utf8), (0..<3000).map { _ in UInt8.random(in: 0...255, using: &generator) },
            nil,
        ]
        let (address, _) = try Self.serve(garbage + [Array("HTTP/1.1 200 OK\r\nX: y\r\n\r\nready\n".utf8)])
        for answer in garbage {
            #expect(AdminHTTPClient.get(address, "/readyz", timeout: 1) == nil, "\(String(describing: answer))")
        }
        let real = try #require(AdminHTTPClient.get(address, "/readyz", timeout: 5))
        #expect(real.status == 200 && real.body == "ready\n")
        #expect(AdminHTTPClient.get(address, "/readyz", timeout: 1) == nil, "a closed port")
    }
}
