import Foundation
import Glibc
import TransportCore
import TransportIO

/// A Redis the fuzzer scripts — a broken or hostile one: every request a connection sends is answered by the next
/// step of the current plan: a reply (split into pieces), silence, part of a reply and a close, or bytes streamed
/// without end. One thread, `poll` over the listener and the connections; stopped (sockets closed) by `stop()`.
final class HostileRedis: @unchecked Sendable {
    // @unchecked Sendable invariant: `plan`, `generation` and `running` are touched under `lock`; the connections
    // only by the server thread.
    /// What the server does with one request.
    enum Step: Sendable, Equatable {
        /// Sends these bytes in `pieces` writes (a tenth of a millisecond apart).
        case reply([UInt8], pieces: Int)
        /// Answers nothing.
        case silence
        /// Sends these bytes, then closes the connection.
        case closeAfter([UInt8])
        /// Sends these bytes again and again until the client closes the connection.
        case stream([UInt8])
    }

    private final class Connection {
        let socket: TCPSocket
        var decoder = RESPDecoder(maxValueBytes: 1 << 20)
        var requests = 0
        var generation: UInt64
        var streaming: [UInt8]?
        var closed = false

        init(socket: TCPSocket, generation: UInt64) {
            self.socket = socket
            self.generation = generation
        }
    }

    let port: UInt16
    private let listener: TCPListener
    private let lock = NSLock()
    private var plan: [Step] = []
    private var generation: UInt64 = 0
    private var running = true
    private var thread: Thread?
    /// Requests received, over all connections (for the report).
    private(set) var requests = 0

    /// A server on a free loopback port.
    init() throws {
        listener = try TCPListener(bindingTo: SocketAddress(host: "127.0.0.1", port: 0)!, backlog: 64)
        port = listener.localAddress.port
        let thread = Thread { [unowned self] in serve() }
        thread.name = "hostile-redis"
        self.thread = thread
        thread.start()
    }

    /// From now on every connection answers its requests with `steps`, the first step for its next request
    /// (silence once they run out).
    func setPlan(_ steps: [Step]) {
        lock.withLock {
            plan = steps
            generation &+= 1
        }
    }

    func stop() {
        let wasRunning = lock.withLock { () -> Bool in
            defer { running = false }
            return running
        }
        guard wasRunning else { return }
        while thread?.isFinished == false { usleep(1000) }
        listener.close()
    }

    deinit { stop() }

    // MARK: - The server thread

    private func serve() {
        var connections: [Connection] = []
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while lock.withLock({ running }) {
            var entries = [pollfd(fd: listener.fd, events: Int16(POLLIN), revents: 0)]
            entries += connections.map { pollfd(fd: $0.socket.fd, events: Int16(POLLIN), revents: 0) }
            let streaming = connections.contains { $0.streaming != nil }
            _ = poll(&entries, nfds_t(entries.count), streaming ? 1 : 5)
            if entries[0].revents != 0 {
                while let socket = try? listener.accept() {
                    connections.append(Connection(socket: socket, generation: lock.withLock { generation }))
                }
            }
            for (index, connection) in connections.enumerated() where index + 1 < entries.count {
                if entries[index + 1].revents != 0 { read(connection, &buffer) }
                if let bytes = connection.streaming, !connection.closed { send(bytes, to: connection) }
            }
            connections.removeAll { connection in
                if connection.closed { connection.socket.close() }
                return connection.closed
            }
        }
        for connection in connections { connection.socket.close() }
    }

    private func read(_ connection: Connection, _ buffer: inout [UInt8]) {
        let result = buffer.withUnsafeMutableBytes { bytes in
            Result { () throws(TransportError) in try connection.socket.read(into: bytes) }
        }
        guard case .success(let read) = result, read != 0 else {  // failed, or the client closed
            connection.closed = true
            return
        }
        guard let count = read else { return }  // nothing waiting
        connection.decoder.append(buffer[..<count])
        while !connection.closed, (try? connection.decoder.next()) != nil {
            let (steps, current) = lock.withLock { (plan, generation) }
            if connection.generation != current {
                connection.generation = current
                connection.requests = 0
            }
            let step = connection.requests < steps.count ? steps[connection.requests] : .silence
            connection.requests += 1
            lock.withLock { requests += 1 }
            perform(step, on: connection)
        }
    }

    private func perform(_ step: Step, on connection: Connection) {
        switch step {
        case .reply(let bytes, let pieces):
            let size = max(1, bytes.count / max(1, pieces))
            var offset = 0
            while offset < bytes.count && !connection.closed {
                send(Array(bytes[offset..<min(bytes.count, offset + size)]), to: connection)
                offset += size
                if offset < bytes.count { usleep(100) }
            }
        case .silence:
            break
        case .closeAfter(let bytes):
            send(bytes, to: connection)
            connection.closed = true
        case .stream(let bytes):
            connection.streaming = bytes.isEmpty ? [0] : bytes
        }
    }

    /// Writes what the socket takes now; a client that closed closes this side too (never a SIGPIPE).
    private func send(_ bytes: [UInt8], to connection: Connection) {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes {
                try? connection.socket.write(UnsafeRawBufferPointer(rebasing: $0[offset...]))
            }
            guard let written else {
                connection.closed = true
                return
            }
            if written == 0 { return }  // the socket buffer is full: the rest is lost, as a stream's would be
            offset += written
        }
    }
}
