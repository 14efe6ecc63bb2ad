import Testing
import TransportIO

/// The admin endpoint's parser on hostile bytes, without sockets: every input ends in an answer that is an HTTP
/// status line, or in nil while it is short of a complete header and within the bounds.
struct AdminHTTPRequestTests {
    private func answer(_ bytes: [UInt8]) -> String? {
        AdminHTTPRequest.answer(bytes, limits: .init()) { path in .init(status: 200, body: "path \(path)") }
            .map { String(decoding: $0, as: UTF8.self) }
    }

    @Test func aGetIsAnsweredWithItsPathWithoutTheQuery() {
        let reply = answer(Array("GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\n\r\n".utf8))
        #expect(reply?.hasPrefix("HTTP/1.1 200 OK\r\n") == true)
        #expect(reply?.hasSuffix("path /metrics") == true)
        #expect(answer(Array("HEAD /readyz HTTP/1.0\r\n\r\n".utf8))?.hasSuffix("\r\n\r\n") == true)
        #expect(answer(Array("GET /metrics HTTP/1.1\r\n".utf8)) == nil, "incomplete: wait for more")
    }

    @Test(arguments: [
        ("GARBAGE\r\n\r\n", "400"), ("POST / HTTP/1.1\r\n\r\n", "405"), ("GET / HTTP/2\r\n\r\n", "400"),
        ("GET x HTTP/1.1\r\n\r\n", "400"), ("GET / HTTP/1.1\r\nbad header\r\n\r\n", "400"),
        ("GET / HTTP/1.1\r\n: empty name\r\n\r\n", "400"), ("get / HTTP/1.1\r\n\r\n", "400"),
        ("GET  / HTTP/1.1\r\n\r\n", "400"),
    ])
    func malformedRequestsGetTheirStatus(request: String, status: String) {
        #expect(answer(Array(request.utf8))?.hasPrefix("HTTP/1.1 \(status) ") == true, "\(request)")
    }

    @Test func boundsAreCheckedBeforeTheHeaderEnds() {
        #expect(answer(Array(repeating: UInt8(ascii: "a"), count: 5000))?.hasPrefix("HTTP/1.1 431 ") == true)
        let lines = "GET / HTTP/1.1\r\n" + String(repeating: "A: b\r\n", count: 40)
        #expect(answer(Array(lines.utf8))?.hasPrefix("HTTP/1.1 431 ") == true)
    }

    @Test func randomBytesNeverCrashAndEndInAStatusOrWait() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<5000 {
            var bytes = (0..<Int.random(in: 0...300, using: &generator)).map { _ in
                UInt8.random(in: 0...255, using: &generator)
            }
            if Bool.random(using: &generator) { bytes = Array("GET / HTTP/1.1\r\n".utf8) + bytes + [13, 10, 13, 10] }
            if let reply = answer(bytes) { #expect(reply.hasPrefix("HTTP/1.1 ")) }
        }
    }
}
