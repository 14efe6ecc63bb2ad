import Glibc
import TransportCore

/// A small, bounded HTTP/1.1 responder for a relay's admin endpoint (health, readiness, metrics), on a thread of its
/// own so that neither a slow scraper nor a hostile one ever touches an event loop. GET only, one request per
/// connection (`Connection: close`); every bound is checked as bytes arrive:
/// a request larger than `Limits.maxRequestBytes` or with more than `Limits.maxHeaders` header lines, a request line
/// that is not `METHOD /path HTTP/1.x`, or a header line without a colon is answered 400 (431 for the size bounds) and
/// closed; a method other than GET or HEAD gets 405. A connection has `Limits.timeout` from accept to its last byte
/// written; past `Limits.maxConnections` open ones, a newcomer is closed at once.
package final class AdminHTTPServer: Sendable {
    /// An answer to one request.
    package struct Response: Sendable {
        package var status: Int
        package var contentType: String
        package var body: String

        package init(status: Int, contentType: String = "text/plain; charset=utf-8", body: String) {
            self.status = status
            self.contentType = contentType
            self.body = body
        }
    }

    /// The responder's bounds.
    package struct Limits: Sendable {
        package var maxRequestBytes = 4096
        package var maxHeaders = 32
        package var maxConnections = 16
        /// Nanoseconds a connection may stay open, from accept to its last byte.
        package var timeout: UInt64 = 5_000_000_000

        package init() {}
    }

    /// The bound address (with the real port when bound to port 0).
    package let address: SocketAddress
    private let running: Locked<Bool>
    private let threadID: Locked<pthread_t?>

    /// Binds `address` and starts answering on a new thread: `respond` gets each request's path (without its query)
    /// and is called on that thread, one request at a time.
    ///
    /// - Throws: `systemCallFailed` (address in use, no descriptors, no thread).
    package init(
        bindingTo address: SocketAddress, limits: Limits = Limits(),
        respond: @escaping @Sendable (_ path: String) -> Response
    ) throws(TransportError) {
        let listener = try TCPListener(bindingTo: address, backlog: 64)
        self.address = listener.localAddress
        let running = Locked(true)
        self.running = running
        threadID = Locked(nil)
        let worker = AdminHTTPWorker(listener: listener, limits: limits, respond: respond, running: running)
        let box = Unmanaged.passRetained(worker)  // released by the thread when its loop ends
        var thread = pthread_t()
        let rv = pthread_create(
            &thread, nil,
            { context in
                let worker = Unmanaged<AdminHTTPWorker>.fromOpaque(context!).takeRetainedValue()
                worker.run()
                return nil
            }, box.toOpaque())
        guard rv == 0 else {
            box.release()
            listener.close()
            throw TransportError(
                .systemCallFailed, "cannot start the admin endpoint's thread: \(errnoDescription(rv))",
                libraryCode: Int(rv))
        }
        threadID.withLock { $0 = thread }
    }

    /// Stops answering, closes every connection and the listener, and waits for the thread (at most one poll
    /// interval, 100 ms).
    package func stop() {
        running.withLock { $0 = false }
        if let thread = threadID.withLock({ id -> pthread_t? in
            defer { id = nil }
            return id
        }) {
            pthread_join(thread, nil)
        }
    }

    deinit { stop() }
}

/// The admin thread's state: the listener and the open connections, touched by that thread only.
private final class AdminHTTPWorker {
    final class Client {
        let socket: TCPSocket
        let deadline: UInt64
        var input: [UInt8] = []
        var output: [UInt8] = []
        var written = 0
        var answered = false

        init(socket: TCPSocket, deadline: UInt64) {
            self.socket = socket
            self.deadline = deadline
        }
    }

    let listener: TCPListener
    let limits: AdminHTTPServer.Limits
    let respond: @Sendable (String) -> AdminHTTPServer.Response
    let running: Locked<Bool>
    var clients: [Client] = []

    init(
        listener: TCPListener, limits: AdminHTTPServer.Limits,
        respond: @escaping @Sendable (String) -> AdminHTTPServer.Response, running: Locked<Bool>
    ) {
        self.listener = listener
        self.limits = limits
        self.respond = respond
        self.running = running
    }

    func run() {
        var buffer = [UInt8](repeating: 0, count: 2048)
        while running.withLock({ $0 }) {
            var descriptors = [pollfd(fd: listener.fd, events: Int16(POLLIN), revents: 0)]
            for client in clients {
                let events = client.answered ? POLLOUT : POLLIN
                descriptors.append(pollfd(fd: client.socket.fd, events: Int16(events), revents: 0))
            }
            _ = poll(&descriptors, nfds_t(descriptors.count), 100)
            let now = MonotonicClock.now()
            if descriptors[0].revents != 0 { acceptAll(now: now) }
            for (index, client) in clients.enumerated() where descriptors.count > index + 1 {
                let ready = descriptors[index + 1].revents
                if ready != 0 { serve(client, buffer: &buffer) }
            }
            clients.removeAll { client in
                let done =
                    (client.answered && client.written >= client.output.count) || now >= client.deadline
                    || client.socket.fd < 0
                if done { client.socket.close() }
                return done
            }
        }
        for client in clients { client.socket.close() }
        clients.removeAll()
        listener.close()
    }

    private func acceptAll(now: UInt64) {
        while let socket = try? listener.accept() {
            guard clients.count < limits.maxConnections else {
                socket.resetOnClose()
                socket.close()
                continue
            }
            clients.append(Client(socket: socket, deadline: now &+ limits.timeout))
        }
    }

    private func serve(_ client: Client, buffer: inout [UInt8]) {
        if !client.answered {
            let count: Int?
            do {
                count = try buffer.withUnsafeMutableBytes { bytes throws(TransportError) in
                    try client.socket.read(into: bytes)
                }
            } catch {
                return client.socket.close()
            }
            guard let count else { return }
            guard count > 0 else { return client.socket.close() }  // the peer left before asking
            client.input += buffer[..<count]
            guard let answer = AdminHTTPRequest.answer(client.input, limits: limits, respond: respond) else { return }
            client.output = answer
            client.answered = true
        }
        while client.written < client.output.count {
            let sent = client.output.withUnsafeBytes { bytes in
                (try? client.socket.write(UnsafeRawBufferPointer(rebasing: bytes[client.written...]))) ?? -1
            }
            if sent < 0 { return client.socket.close() }
            if sent == 0 { return }
            client.written += sent
        }
    }
}
