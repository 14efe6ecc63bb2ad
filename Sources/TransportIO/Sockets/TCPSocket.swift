import Glibc
internal import CTransportShims
import TransportCore

/// A non-blocking TCP connection with `TCP_NODELAY`, closed in `deinit`.
///
/// - Important: Create it on any thread (so a caller can pick the network namespace); after that, use it only on
///   the event loop that registered it.
package final class TCPSocket {
    package let fd: Int32
    package let remoteAddress: SocketAddress
    package private(set) var localAddress: SocketAddress
    private var closed = false

    /// Starts connecting to `peer`; the connection is established when the socket becomes writable and
    /// `connectionError()` is nil.
    package init(connectingTo peer: SocketAddress) throws(TransportError) {
        fd = try systemCall("socket(TCP)") {
            socket(peer.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        }
        remoteAddress = peer
        localAddress = peer
        Self.configure(fd)
        let rv = peer.withSockAddr { addr, length in connect(fd, addr, length) }
        if rv != 0 && errno != EINPROGRESS {
            let code = errno
            Glibc.close(fd)
            throw Self.connectFailure(code, peer)
        }
        localAddress = (try? UDPSocket.localAddress(of: fd)) ?? peer
    }

    /// Wraps a descriptor `TCPListener` accepted.
    init(accepted fd: Int32, remote: SocketAddress) {
        self.fd = fd
        remoteAddress = remote
        localAddress = (try? UDPSocket.localAddress(of: fd)) ?? remote
        Self.configure(fd)
    }

    deinit { close() }

    package func close() {
        guard !closed else { return }
        closed = true
        Glibc.close(fd)
    }

    private static func configure(_ fd: Int32) {
        var one: Int32 = 1
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    /// After the socket became writable: nil when connected, else why the connection failed.
    package func connectionError() -> TransportError? {
        var code: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_ERROR, &code, &length) == 0 else {
            return Self.connectFailure(errno, remoteAddress)
        }
        if code == 0 { localAddress = (try? UDPSocket.localAddress(of: fd)) ?? localAddress }
        return code == 0 ? nil : Self.connectFailure(code, remoteAddress)
    }

    private static func connectFailure(_ code: Int32, _ peer: SocketAddress) -> TransportError {
        let unreachable = [ECONNREFUSED, EHOSTUNREACH, ENETUNREACH, ETIMEDOUT].contains(code)
        return TransportError(unreachable ? .unreachable : .systemCallFailed,
                              "connecting to \(peer) over TCP failed: \(errnoDescription(code))", libraryCode: Int(code))
    }

    /// Reads into `buffer`: the byte count, 0 at end of stream, nil when nothing is waiting.
    package func read(into buffer: UnsafeMutableRawBufferPointer) throws(TransportError) -> Int? {
        guard !closed else { return 0 }
        while true {
            let n = Glibc.read(fd, buffer.baseAddress, buffer.count)
            if n >= 0 { return n }
            let code = errno
            if code == EINTR { continue }
            if code == EAGAIN || code == EWOULDBLOCK { return nil }
            throw TransportError(code == ECONNRESET ? .connectionReset : .systemCallFailed,
                                 "reading from TCP failed: \(errnoDescription(code))", libraryCode: Int(code))
        }
    }

    /// Writes what the kernel takes now: the byte count (0 when the send buffer is full).
    package func write(_ bytes: UnsafeRawBufferPointer) throws(TransportError) -> Int {
        guard !closed else { throw TransportError(.connectionClosed, "the TCP connection is closed") }
        guard !bytes.isEmpty else { return 0 }
        while true {
            let n = Glibc.send(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL))
            if n >= 0 { return n }
            let code = errno
            if code == EINTR { continue }
            if code == EAGAIN || code == EWOULDBLOCK { return 0 }
            throw TransportError(code == ECONNRESET || code == EPIPE ? .connectionReset : .systemCallFailed,
                                 "writing to TCP failed: \(errnoDescription(code))", libraryCode: Int(code))
        }
    }

    /// Bytes written but not yet acknowledged by the peer (`SIOCOUTQ`); 0 if unknown.
    package var unsentBytes: Int { max(0, Int(ptt_tcp_unsent_bytes(fd))) }
}

/// A non-blocking TCP listening socket, closed in `deinit`.
package final class TCPListener {
    package let fd: Int32
    package let localAddress: SocketAddress
    private var closed = false

    /// Listens on `address` (port 0 picks a free port).
    package init(bindingTo address: SocketAddress, backlog: Int32 = 1024) throws(TransportError) {
        let fd = try systemCall("socket(TCP)") {
            socket(address.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        }
        do throws(TransportError) {
            var one: Int32 = 1
            _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
            try address.withSockAddr { addr, length throws(TransportError) in
                try systemCall("bind(TCP \(address))") { bind(fd, addr, length) }
            }
            try systemCall("listen(\(address))") { listen(fd, backlog) }
            localAddress = try UDPSocket.localAddress(of: fd)
        } catch {
            Glibc.close(fd)
            throw error
        }
        self.fd = fd
    }

    deinit { close() }

    package func close() {
        guard !closed else { return }
        closed = true
        Glibc.close(fd)
    }

    /// The next pending connection, or nil when none is waiting. Running out of descriptors is reported, not fatal.
    package func accept() throws(TransportError) -> TCPSocket? {
        guard !closed else { return nil }
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        while true {
            let client = ptt_tcp_accept(fd, &storage, &length)
            if client >= 0 {
                return TCPSocket(accepted: client, remote: SocketAddress(copying: &storage, length: length))
            }
            let code = errno
            if code == EINTR || code == ECONNABORTED { continue }
            if code == EAGAIN || code == EWOULDBLOCK { return nil }
            throw TransportError(.systemCallFailed, "accepting a TCP connection failed: \(errnoDescription(code))",
                                 libraryCode: Int(code))
        }
    }
}
