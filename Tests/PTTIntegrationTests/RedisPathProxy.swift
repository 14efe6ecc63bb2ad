import Foundation
import Glibc
import Testing
import TransportCore
import TransportIO

/// A TCP proxy between relays and a Redis, for tests of what the path and the server can do to the anti-replay
/// store: delay each direction, stall, switch the relays' connections to another Redis without closing them (a
/// failover behind a proxy), or stop forwarding and answer like a broken or hostile Redis (error replies, a valid
/// reply that never ends, garbage).
///
/// One thread, `poll` over the listener and every connection; bytes are released per direction once `delay` has
/// passed since they arrived. Stopped (and its sockets closed) by `stop()` or when released.
final class RedisPathProxy: @unchecked Sendable {
    // @unchecked Sendable invariant: every mutable field is touched under `lock`, by the proxy thread and the test.
    /// How the proxy answers the relays' commands.
    enum Mode: Equatable, Sendable, CustomTestStringConvertible {
        /// Forward to the upstream Redis.
        case forward
        /// Answer every command with this error line (`-READONLY ...`) without forwarding.
        case errorReply(String)
        /// Answer the first command with a valid reply that never ends: arrays of 1000 items nested 8 deep, the
        /// items `:1` without end (what a broken or hostile Redis can stream).
        case endlessReply
        /// Answer with garbage bytes without end.
        case garbage

        var testDescription: String {
            switch self {
            case .forward: "forward"
            case .errorReply(let line): "error \(line.prefix(12))"
            case .endlessReply: "endless reply"
            case .garbage: "garbage"
            }
        }
    }

    private final class Link {
        /// The relay's connection (non-blocking; the socket writes never raise SIGPIPE).
        let client: TCPSocket
        var upstream: Int32
        var toUpstream: [(at: UInt64, bytes: [UInt8])] = []
        var toClient: [(at: UInt64, bytes: [UInt8])] = []
        /// Answering like a hostile Redis (streaming without end) since the relay's first command.
        var hostile = false
        var sentHeader = false
        var closed = false

        init(client: TCPSocket, upstream: Int32) {
            self.client = client
            self.upstream = upstream
        }
    }

    let port: UInt16
    private let listener: TCPListener
    private let lock = NSLock()
    private var upstreamPort: UInt16
    private var delay: UInt64
    private var stalledUntil: UInt64 = 0
    private var mode = Mode.forward
    private var links: [Link] = []
    private var running = true
    private var thread: Thread?
    /// Connections the relays opened through the proxy so far.
    private(set) var accepted = 0

    /// A proxy on a free loopback port to Redis at 127.0.0.1:`upstream`, delaying each direction by `delay`.
    init(upstream: UInt16, delay: Duration = .zero) throws {
        upstreamPort = upstream
        self.delay = Self.nanoseconds(delay)
        listener = try TCPListener(bindingTo: SocketAddress(host: "127.0.0.1", port: 0)!, backlog: 64)
        port = listener.localAddress.port
        let thread = Thread { [unowned self] in run() }
        thread.name = "redis-path-proxy"
        self.thread = thread
        thread.start()
    }

    private static func nanoseconds(_ duration: Duration) -> UInt64 {
        UInt64(duration.components.seconds) * 1_000_000_000 + UInt64(duration.components.attoseconds / 1_000_000_000)
    }

    deinit { stop() }

    struct ProxyError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    /// The anti-replay URL through this proxy (generous test options as `RedisTestServer.url`, unless given).
    func url(deadlineMilliseconds: Int? = 1000) -> String {
        "redis://127.0.0.1:\(port)?clock-skew-ms=0" + (deadlineMilliseconds.map { "&deadline-ms=\($0)" } ?? "")
    }

    /// Delays each direction by `delay` from now on.
    func setDelay(_ delay: Duration) {
        let nanoseconds =
            UInt64(delay.components.seconds) * 1_000_000_000 + UInt64(delay.components.attoseconds / 1_000_000_000)
        lock.withLock { self.delay = nanoseconds }
    }

    /// Holds every byte, both ways, for `duration` from now.
    func stall(for duration: Duration) {
        let nanoseconds =
            UInt64(duration.components.seconds) * 1_000_000_000
            + UInt64(duration.components.attoseconds / 1_000_000_000)
        lock.withLock { stalledUntil = Self.now() + nanoseconds }
    }

    func setMode(_ mode: Mode) { lock.withLock { self.mode = mode } }

    /// From now on the relays' connections go to Redis at `port`: each open one is moved to a new upstream
    /// connection there (what was in flight to the old one is lost), and stays open on the relays' side.
    func switchUpstream(to port: UInt16) {
        lock.withLock {
            upstreamPort = port
            for link in links {
                close(link.upstream)
                link.toUpstream.removeAll()
                link.upstream = Self.connectUpstream(port)
            }
        }
    }

    /// Closes every connection the relays have through the proxy (they reconnect).
    func dropConnections() {
        lock.withLock {
            for link in links { closeLink(link) }
            links.removeAll()
        }
    }

    func stop() {
        lock.withLock {
            guard running else { return }
            running = false
        }
        while thread?.isFinished == false { usleep(1000) }
        lock.withLock {
            for link in links { closeLink(link) }
            links.removeAll()
            listener.close()
        }
    }

    /// 64 KiB of a never-ending reply's items, and of garbage: what a hostile Redis streams, chunk after chunk.
    private static let endlessItems = Array(Array(repeating: Array(":1\r\n".utf8), count: 16_384).joined())
    private static let garbage = (0..<65_536).map { _ in UInt8.random(in: 0...255) }

    private static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    private static func connectUpstream(_ port: UInt16) -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = port.bigEndian
        let rv = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        if rv != 0 {
            close(fd)
            return -1
        }
        return fd
    }

    private func closeLink(_ link: Link) {
        guard !link.closed else { return }
        link.closed = true
        link.client.close()
        if link.upstream >= 0 { close(link.upstream) }
        link.upstream = -1
    }

    // MARK: - The proxy thread

    private func run() {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            var descriptors = [pollfd(fd: listener.fd, events: Int16(POLLIN), revents: 0)]
            let wait: UInt64 = lock.withLock {
                guard running else { return 0 }
                for link in links {
                    descriptors.append(pollfd(fd: link.client.fd, events: Int16(POLLIN), revents: 0))
                    descriptors.append(pollfd(fd: link.upstream, events: Int16(POLLIN), revents: 0))  // -1: ignored
                }
                let pendingRelease = links.flatMap { [$0.toUpstream.first?.at, $0.toClient.first?.at] }.compactMap {
                    $0
                }
                let now = Self.now()
                let next = (pendingRelease + [stalledUntil]).filter { $0 > now }.min()
                // A hostile stream is written as fast as the relay takes it (a Redis that never lets a read find
                // nothing); otherwise the next release, or a check every 2 ms.
                if links.contains(where: { $0.hostile && !$0.closed }) { return 0 }
                return next.map { min($0 - now, 2_000_000) } ?? 2_000_000
            }
            if !lock.withLock({ running }) { return }
            _ = poll(&descriptors, nfds_t(descriptors.count), Int32((wait + 999_999) / 1_000_000))  // late by < 1 ms
            lock.withLock {
                let now = Self.now()
                if descriptors[0].revents != 0 { acceptAll() }
                for (index, link) in links.enumerated() {
                    let clientReady = descriptors.count > 1 + 2 * index && descriptors[1 + 2 * index].revents != 0
                    let upstreamReady = descriptors.count > 2 + 2 * index && descriptors[2 + 2 * index].revents != 0
                    if clientReady && !link.closed { readClient(link, &buffer, now: now) }
                    if upstreamReady && link.upstream >= 0 && !link.closed && !link.hostile {
                        let n = read(link.upstream, &buffer, buffer.count)
                        if n > 0 {
                            link.toClient.append((now + delay, Array(buffer[..<n])))
                        } else if n == 0 {
                            closeLink(link)  // the Redis went away: so does the relay's connection
                        }
                    }
                }
                release(now: now)
                links.removeAll(where: \.closed)
            }
        }
    }

    private func acceptAll() {
        while let socket = try? listener.accept() {
            accepted += 1
            links.append(Link(client: socket, upstream: mode == .forward ? Self.connectUpstream(upstreamPort) : -1))
        }
    }

    private func readClient(_ link: Link, _ buffer: inout [UInt8], now: UInt64) {
        let n = read(link.client.fd, &buffer, buffer.count)
        guard n > 0 else {
            if n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK) { closeLink(link) }
            return
        }
        switch mode {
        case .forward:
            if link.upstream < 0 { link.upstream = Self.connectUpstream(upstreamPort) }
            link.toUpstream.append((now + delay, Array(buffer[..<n])))
        case .errorReply(let line):
            let reply = Array("-\(line)\r\n".utf8)
            let commands = max(1, Self.commandCount(buffer[..<n]))
            link.toClient.append((now + delay, Array((0..<commands).map { _ in reply }.joined())))
        case .endlessReply, .garbage:
            link.hostile = true
        }
    }

    /// The commands (RESP arrays) that start in `bytes`, roughly: each `*` at the start of a line.
    private static func commandCount(_ bytes: ArraySlice<UInt8>) -> Int {
        var count = 0
        var previous: UInt8 = 0x0A
        for byte in bytes {
            if byte == UInt8(ascii: "*") && previous == 0x0A { count += 1 }
            previous = byte
        }
        return count
    }

    private func release(now: UInt64) {
        guard now >= stalledUntil else { return }
        for link in links where !link.closed {
            while let first = link.toUpstream.first, first.at <= now, link.upstream >= 0, !link.closed {
                writeAll(link, to: link.upstream, first.bytes)
                link.toUpstream.removeFirst()
            }
            while let first = link.toClient.first, first.at <= now, !link.closed {
                writeAll(link, to: link.client.fd, first.bytes)
                link.toClient.removeFirst()
            }
            if link.hostile && !link.closed {
                switch mode {
                case .endlessReply:
                    let chunk = link.sentHeader ? [] : Array(String(repeating: "*1000\r\n", count: 8).utf8)
                    link.sentHeader = true
                    writeAll(
                        link, to: link.client.fd, chunk + Self.endlessItems)
                case .garbage:
                    writeAll(link, to: link.client.fd, Self.garbage)
                default:
                    break
                }
            }
        }
    }

    /// Writes what the socket takes now (a relay that stopped reading loses the rest: a hostile stream); a
    /// connection the other side closed is closed here too (never a SIGPIPE).
    private func writeAll(_ link: Link, to fd: Int32, _ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes {
                send(fd, $0.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
            }
            if n > 0 {
                offset += n
                continue
            }
            if n < 0 && errno != EAGAIN && errno != EWOULDBLOCK { closeLink(link) }
            return
        }
    }
}
