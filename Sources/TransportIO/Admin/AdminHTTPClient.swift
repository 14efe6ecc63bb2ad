import Glibc
import TransportCore

/// A blocking HTTP/1.1 GET for an admin endpoint on this host (the `--workers` supervisor asking each worker's):
/// connects, sends one request, reads until the server closes, each step bounded by `timeout`. For a thread that
/// may block (the admin thread), never for an event loop.
package enum AdminHTTPClient {
    /// The most bytes read from one answer (a worker's metrics are a few KiB).
    package static let maxAnswerBytes = 1 << 20

    /// `path` at `address`: the status code and the body, or nil when the endpoint could not be reached or answered
    /// nothing readable within `timeout` seconds per step.
    package static func get(_ address: SocketAddress, _ path: String, timeout: Int = 1) -> (status: Int, body: String)?
    {
        let fd = socket(
            address.isIPv6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var limit = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        guard address.withSockAddr({ connect(fd, $0, $1) }) == 0 else { return nil }
        let request = Array("GET \(path) HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".utf8)
        var sent = 0
        while sent < request.count {
            let n = request[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { return nil }
            sent += n
        }
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while answer.count < maxAnswerBytes {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n <= 0 { break }
            answer += buffer[..<n]
        }
        let separator: [UInt8] = [13, 10, 13, 10]
        guard let end = (0..<max(0, answer.count - 3)).first(where: { answer[$0..<($0 + 4)].elementsEqual(separator) })
        else { return nil }
        let head = String(decoding: answer[..<end], as: UTF8.self)
        guard head.hasPrefix("HTTP/1."),
            let status = Int(head.split(separator: " ", maxSplits: 2).dropFirst().first ?? "")
        else { return nil }
        return (status, String(decoding: answer[(end + 4)...], as: UTF8.self))
    }
}
