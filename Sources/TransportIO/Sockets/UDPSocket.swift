internal import CTransportShims
import Glibc
import TransportCore

/// A non-blocking UDP socket with ECN and local-address (pktinfo) reporting, closed in `deinit`.
///
/// - Important: Create it on any thread (so a caller can pick the network namespace); after that, use it only on
///   the event loop that registered it.
package final class UDPSocket {
    package let fd: Int32
    package let family: Int32
    /// The bound local address (port resolved when binding to port 0).
    package private(set) var localAddress: SocketAddress
    /// The peer of a connected (client) socket.
    package let connectedPeer: SocketAddress?
    /// Whether the socket is bound to a wildcard address, so replies need an explicit source address.
    package let isWildcard: Bool
    private var closed = false

    /// A server socket bound to `address` (port 0 picks a free port); `reusePort` joins (or starts) the
    /// address's SO_REUSEPORT group, where the kernel spreads datagrams over the group's sockets.
    package convenience init(bindingTo address: SocketAddress, reusePort: Bool = false) throws(TransportError) {
        try self.init(address: address, peer: nil) { fd, addr, length throws(TransportError) in
            if reusePort { _ = try systemCall("setsockopt(SO_REUSEPORT)") { ptt_enable_reuseport(fd) } }
            _ = try systemCall("bind(\(address))") { bind(fd, addr, length) }
        }
    }

    /// A client socket connected to `peer` (so ICMP errors surface as ECONNREFUSED / EHOSTUNREACH).
    package convenience init(connectingTo peer: SocketAddress) throws(TransportError) {
        try self.init(address: peer, peer: peer) { fd, addr, length throws(TransportError) in
            _ = try systemCall("connect(\(peer))") { connect(fd, addr, length) }
        }
    }

    /// A client socket bound to `local` (port 0 picks a free port) and connected to `peer`: a connection's new
    /// path when it migrates to another local address.
    package convenience init(bindingTo local: SocketAddress, connectingTo peer: SocketAddress) throws(TransportError) {
        try self.init(address: local, peer: peer) { fd, addr, length throws(TransportError) in
            _ = try systemCall("bind(\(local))") { bind(fd, addr, length) }
            _ = try peer.withSockAddr { peerAddr, peerLength throws(TransportError) in
                try systemCall("connect(\(peer))") { connect(fd, peerAddr, peerLength) }
            }
        }
    }

    /// A bound server socket inherited from the process that started this one (a relay worker's share of its
    /// parent's SO_REUSEPORT group): made non-blocking and close-on-exec here, configured as a bound one is.
    package init(adopting fd: Int32) throws(TransportError) {
        let local: SocketAddress
        do throws(TransportError) {
            local = try Self.localAddress(of: fd)
            try adoptDescriptor(fd)
            try Self.configure(fd, family: local.family)
        } catch {
            Glibc.close(fd)
            throw error
        }
        // Stored properties last: an init that threw after setting them all would run `deinit`, which closes the
        // descriptor a second time (by then maybe another thread's new socket).
        self.fd = fd
        family = local.family
        connectedPeer = nil
        isWildcard = local.addressBytes.allSatisfy { $0 == 0 }
        localAddress = local
    }

    /// Creates, configures, then binds or connects (`attach`) to `address`; closes the descriptor on failure.
    private init(
        address: SocketAddress, peer: SocketAddress?,
        attach: (Int32, UnsafePointer<sockaddr>, socklen_t) throws(TransportError) -> Void
    ) throws(TransportError) {
        let fd = try Self.makeSocket(family: address.family)
        let local: SocketAddress
        do throws(TransportError) {
            try Self.configure(fd, family: address.family)
            try address.withSockAddr { addr, length throws(TransportError) in try attach(fd, addr, length) }
            local = try Self.localAddress(of: fd)
        } catch {
            Glibc.close(fd)  // once: no stored property is set yet, so no `deinit` closes it again
            throw error
        }
        self.fd = fd
        family = address.family
        connectedPeer = peer
        isWildcard = peer == nil && address.addressBytes.allSatisfy { $0 == 0 }
        localAddress = local
    }

    deinit { close() }

    package func close() {
        guard !closed else { return }
        closed = true
        Glibc.close(fd)
    }

    private static func makeSocket(family: Int32) throws(TransportError) -> Int32 {
        try systemCall("socket(UDP)") {
            SocketFactory.socket(
                domain: family,
                type: Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue),
                protocol: 0)
        }
    }

    private static func configure(_ fd: Int32, family: Int32) throws(TransportError) {
        var size: Int32 = 4 * 1024 * 1024
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        let rv = ptt_udp_enable_cmsgs(fd, family)
        if rv < 0 {
            throw TransportError(
                .systemCallFailed, "enabling ECN/pktinfo failed: \(errnoDescription(-rv))",
                libraryCode: Int(-rv))
        }
    }

    package static func localAddress(of fd: Int32) throws(TransportError) -> SocketAddress {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = try withUnsafeMutablePointer(to: &storage) { pointer throws(TransportError) in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { addr throws(TransportError) in
                try systemCall("getsockname") { getsockname(fd, addr, &length) }
            }
        }
        return SocketAddress(copying: &storage, length: length)
    }

    /// One received datagram.
    package struct Received {
        package var length: Int
        package var remote: SocketAddress
        package var local: SocketAddress
        package var ecn: UInt32
    }

    /// Receives one datagram into `buffer`; nil when nothing is waiting. An ICMP error on a connected socket
    /// throws (`ECONNREFUSED`: port unreachable).
    package func receive(into buffer: UnsafeMutableRawBufferPointer) throws(TransportError) -> Received? {
        guard !closed else { return nil }
        var remote = sockaddr_storage()
        var remoteLength = socklen_t(0)
        var local = sockaddr_storage()
        var localLength = socklen_t(0)
        var ecn: UInt32 = 0
        let n = ptt_udp_recv(
            fd, buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), buffer.count, &remote,
            &remoteLength, &local, &localLength, &ecn)
        if n < 0 {
            let code = Int32(-n)
            if code == EAGAIN || code == EWOULDBLOCK { return nil }
            throw Self.receiveFailure(code)
        }
        return received(
            length: Int(n), remote: &remote, remoteLength: remoteLength, local: &local, localLength: localLength,
            ecn: ecn)
    }

    /// A failed receive as a typed error: `unreachable` for an ICMP port-unreachable (ECONNREFUSED), else
    /// `systemCallFailed`.
    static func receiveFailure(_ code: Int32) -> TransportError {
        TransportError(
            code == ECONNREFUSED ? .unreachable : .systemCallFailed,
            "receiving on UDP failed: \(errnoDescription(code))", libraryCode: Int(code))
    }

    /// What the kernel reported of one datagram, as addresses: the local one keeps this socket's port (packet info
    /// names only the address), the remote one is the connected peer when the kernel named none.
    func received(
        length: Int, remote: inout sockaddr_storage, remoteLength: socklen_t, local: inout sockaddr_storage,
        localLength: socklen_t, ecn: UInt32
    ) -> Received {
        var localAddress = localLength > 0 ? SocketAddress(copying: &local, length: localLength) : self.localAddress
        if localLength > 0 { localAddress = localAddress.with(port: self.localAddress.port) }
        let remoteAddress =
            remoteLength > 0
            ? SocketAddress(copying: &remote, length: remoteLength)
            : (connectedPeer ?? SocketAddress())
        return Received(length: length, remote: remoteAddress, local: localAddress, ecn: ecn)
    }

    /// Whether `close()` ran (nothing may be sent on the descriptor number any more).
    package var isClosed: Bool { closed }

    /// Sends one datagram (or several equal-size segments with GSO when `segmentSize` > 0). Returns nil when
    /// sent, or the errno (EAGAIN: the socket buffer is full — the packet is lost, QUIC recovers).
    @discardableResult
    package func send(
        _ bytes: UnsafeRawBufferPointer, to remote: SocketAddress?, from local: SocketAddress?,
        ecn: UInt32, segmentSize: Int = 0
    ) -> Int32? {
        guard !closed else { return EBADF }  // never write to a descriptor number that may have been reused
        let base = bytes.baseAddress!.assumingMemoryBound(to: UInt8.self)
        let n = withRoute(to: remote, from: local) { addr, length, source, sourceLength in
            ptt_udp_send(fd, base, bytes.count, addr, length, source, sourceLength, ecn, segmentSize)
        }
        return n < 0 ? Int32(-n) : nil
    }

    /// Calls `body` with what a send to `remote` from `local` passes to the kernel: the destination (nil on a
    /// connected socket) and the source address (nil unless the socket is bound to a wildcard address).
    func withRoute<T>(
        to remote: SocketAddress?, from local: SocketAddress?,
        _ body: (UnsafePointer<sockaddr>?, socklen_t, UnsafePointer<sockaddr>?, socklen_t) -> T
    ) -> T {
        func withSource(_ addr: UnsafePointer<sockaddr>?, _ length: socklen_t) -> T {
            guard isWildcard, let local else { return body(addr, length, nil, 0) }
            return local.withSockAddr { body(addr, length, $0, $1) }
        }
        if let remote, connectedPeer == nil {
            return remote.withSockAddr { addr, length in withSource(addr, length) }
        }
        return withSource(nil, 0)
    }
}
