internal import CTransportShims
import Glibc
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
    /// `connectionError()` is nil. With `fastOpen` (`TCP_FASTOPEN_CONNECT`) and a cookie the kernel cached for
    /// `peer`, the SYN is deferred until the first write and carries its bytes; without a cookie it asks for one.
    package init(connectingTo peer: SocketAddress, fastOpen: Bool = false) throws(TransportError) {
        fd = try systemCall("socket(TCP)") {
            SocketFactory.socket(
                domain: peer.family,
                type: Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue),
                protocol: 0)
        }
        remoteAddress = peer
        localAddress = peer
        Self.configure(fd)
        if fastOpen {
            var one: Int32 = 1  // best effort: kernels without it simply connect normally
            _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_FASTOPEN_CONNECT, &one, socklen_t(MemoryLayout<Int32>.size))
        }
        let rv = peer.withSockAddr { addr, length in connect(fd, addr, length) }
        if rv != 0 && errno != EINPROGRESS {
            let code = errno
            // Through `close()`, which marks it closed: this init has set every stored property, so throwing runs
            // `deinit`, and a bare close(2) here would close the number twice — by then maybe another thread's new
            // socket (an immediate refusal on loopback did that: a concurrent bind failed with EBADF).
            close()
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

    /// Makes `close` reset the connection (RST, `SO_LINGER` 0) instead of sending FIN after any unsent bytes: for
    /// connections refused at accept or dropped before their handshake finished, so the kernel keeps no
    /// FIN_WAIT or TIME_WAIT state for them.
    package func resetOnClose() {
        guard !closed else { return }
        var option = linger(l_onoff: 1, l_linger: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_LINGER, &option, socklen_t(MemoryLayout<linger>.size))
    }

    /// Fixes the kernel's buffers of this connection at `send` and `receive` bytes (SO_SNDBUF, SO_RCVBUF: the
    /// kernel allows twice each and stops autotuning them), so a peer cannot make them grow: a reader that stops
    /// after reading fast, or a sender to a relay that stopped reading. Best effort.
    package func limitBuffers(send: Int32, receive: Int32) {
        var send = send
        var receive = receive
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &send, socklen_t(MemoryLayout<Int32>.size))
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receive, socklen_t(MemoryLayout<Int32>.size))
    }

    private static func configure(_ fd: Int32) {
        var one: Int32 = 1
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        ThinStreamTimers.apply(to: fd)
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
        return TransportError(
            unreachable ? .unreachable : .systemCallFailed,
            "connecting to \(peer) over TCP failed: \(errnoDescription(code))"
                + exhaustionHint(code), libraryCode: Int(code))
    }

    /// A failed read or write. With Fast Open the connect completes during the first write, so a refused or
    /// unreachable peer can surface here too.
    private static func ioFailure(_ code: Int32, _ action: String) -> TransportError {
        let kind: TransportError.Code
        switch code {
        case ECONNRESET, EPIPE: kind = .connectionReset
        case ECONNREFUSED, EHOSTUNREACH, ENETUNREACH, ETIMEDOUT: kind = .unreachable
        default: kind = .systemCallFailed
        }
        return TransportError(
            kind, "\(action) TCP failed: \(errnoDescription(code))" + exhaustionHint(code),
            libraryCode: Int(code))
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
            throw Self.ioFailure(code, "reading from")
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
            throw Self.ioFailure(code, "writing to")
        }
    }

    /// Bytes written but not yet acknowledged by the peer (`SIOCOUTQ`); 0 if unknown.
    package var unsentBytes: Int { max(0, Int(ptt_tcp_unsent_bytes(fd))) }

    /// The kernel's view of the connection (`TCP_INFO`): smoothed RTT in nanoseconds (0 if unknown) and whether
    /// data sent in the SYN was acknowledged (TCP Fast Open took effect).
    package var kernelInfo: (smoothedRTT: UInt64, fastOpenUsed: Bool) {
        var rtt: UInt32 = 0
        var variance: UInt32 = 0
        var synData: Int32 = 0
        guard !closed, ptt_tcp_info(fd, &rtt, &variance, &synData) == 0 else { return (0, false) }
        return (UInt64(rtt) * 1000, synData != 0)
    }
}

/// A non-blocking TCP listening socket, closed in `deinit`.
package final class TCPListener {
    package let fd: Int32
    package let localAddress: SocketAddress
    private var closed = false

    /// A listening socket inherited from the process that started this one (a relay worker's share of its
    /// parent's listener: every worker accepts from it); made non-blocking and close-on-exec here.
    package init(adopting fd: Int32) throws(TransportError) {
        let local: SocketAddress
        do throws(TransportError) {
            local = try UDPSocket.localAddress(of: fd)
            try adoptDescriptor(fd)
        } catch {
            Glibc.close(fd)  // once: no stored property is set yet, so no `deinit` closes it again
            throw error
        }
        self.fd = fd
        localAddress = local
    }

    /// Listens on `address` (port 0 picks a free port).
    package init(bindingTo address: SocketAddress, backlog: Int32 = 1024) throws(TransportError) {
        let fd = try systemCall("socket(TCP)") {
            SocketFactory.socket(
                domain: address.family,
                type: Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue),
                protocol: 0)
        }
        do throws(TransportError) {
            var one: Int32 = 1
            _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
            _ = try address.withSockAddr { addr, length throws(TransportError) in
                try systemCall("bind(TCP \(address))") { bind(fd, addr, length) }
            }
            // TCP Fast Open: accept data in the SYN from clients holding our cookie. Effective only where the
            // host enables server TFO (sysctl net.ipv4.tcp_fastopen has bit 0x2); harmless otherwise.
            var queue: Int32 = backlog
            _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_FASTOPEN, &queue, socklen_t(MemoryLayout<Int32>.size))
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

    /// The next pending connection, or nil when none is waiting. Running out of descriptors is reported, not fatal:
    /// - A connection that landed in the `DescriptorHeadroom` reserve is reset and closed at once and reported as
    ///   `connectionRefused`; the next one can be accepted (and refused) straight away.
    /// - EMFILE, ENFILE, ENOMEM... throw `systemCallFailed`. The connection stays queued and the listener
    ///   readable, so the caller should stop watching it for a while rather than retry at once.
    package func accept() throws(TransportError) -> TCPSocket? {
        guard !closed else { return nil }
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        while true {
            let client = ptt_tcp_accept(fd, &storage, &length)
            if client >= 0 {
                let socket = TCPSocket(accepted: client, remote: SocketAddress(copying: &storage, length: length))
                guard !DescriptorHeadroom.isInReserve(client) else {
                    socket.resetOnClose()
                    socket.close()
                    let limit = DescriptorHeadroom.softLimit ?? 0
                    throw TransportError(
                        .connectionRefused,
                        "refused a TCP connection from \(socket.remoteAddress): "
                            + "fewer than \(DescriptorHeadroom.reserve(forLimit: limit)) of the \(limit) descriptors are "
                            + "left, kept for the rest of the process" + exhaustionHint(EMFILE),
                        libraryCode: Int(EMFILE))
                }
                return socket
            }
            let code = errno
            if code == EINTR || code == ECONNABORTED { continue }
            if code == EAGAIN || code == EWOULDBLOCK { return nil }
            throw TransportError(
                .systemCallFailed,
                "accepting a TCP connection failed: \(errnoDescription(code))"
                    + exhaustionHint(code), libraryCode: Int(code))
        }
    }
}
