import Foundation
import Glibc
import Testing

/// A blocking HTTP exchange for the admin endpoint's tests: connects to `address` (`HOST:PORT`, IPv4), writes
/// `request` as is, and reads until the server closes (at most `timeout` seconds). Throws when it cannot connect.
func adminExchange(_ address: String, _ request: [UInt8], timeout: Int = 10) throws -> String {
    let fd = try adminConnect(address, timeout: timeout)
    defer { close(fd) }
    var sent = 0
    while sent < request.count {
        let n = request[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        if n <= 0 { break }  // the server may answer and close before reading everything
        sent += n
    }
    return adminReadToEnd(fd)
}

/// A GET of `path`: the status code and the body.
func adminGet(_ address: String, _ path: String) throws -> (status: Int, body: String) {
    let reply = try adminExchange(address, Array("GET \(path) HTTP/1.1\r\nHost: test\r\n\r\n".utf8))
    let status = Int(reply.split(separator: " ", maxSplits: 2).dropFirst().first ?? "") ?? 0
    let body = reply.range(of: "\r\n\r\n").map { String(reply[$0.upperBound...]) } ?? ""
    return (status, body)
}

/// A connected TCP socket to `address` with receive and send timeouts of `timeout` seconds.
func adminConnect(_ address: String, timeout: Int = 10) throws -> Int32 {
    let colon = try #require(address.lastIndex(of: ":"))
    var peer = sockaddr_in()
    peer.sin_family = sa_family_t(AF_INET)
    peer.sin_port = in_port_t(UInt16(address[address.index(after: colon)...])!).bigEndian
    inet_pton(AF_INET, String(address[..<colon]), &peer.sin_addr)
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var limit = timeval(tv_sec: timeout, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
    let rv = withUnsafePointer(to: &peer) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    guard rv == 0 else {
        close(fd)
        throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
    }
    return fd
}

/// Everything the peer sends until it closes (or the receive timeout passes, or it resets).
func adminReadToEnd(_ fd: Int32) -> String {
    var reply: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let n = recv(fd, &buffer, buffer.count, 0)
        if n <= 0 { break }
        reply += buffer[..<n]
    }
    return String(decoding: reply, as: UTF8.self)
}
