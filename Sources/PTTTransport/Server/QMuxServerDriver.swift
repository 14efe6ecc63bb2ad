import TransportCore
import TransportIO

/// The loop side of a relay's TCP listener: accepts connections and runs QMux over TLS 1.3 on each, handing
/// each one to the same application handler as QUIC connections once it is ready.
final class QMuxServerDriver {
    let loop: EventLoop
    let listener: TCPListener
    let tls: TLSServerContext
    let configuration: ServerConfiguration
    let parameters: QUICParameters
    private var drivers: [ObjectIdentifier: QMuxConnectionDriver] = [:]
    /// Called on the loop for every connection that became ready.
    let accepted: (TransportConnection) -> Void
    /// Accept failures so far (e.g. out of descriptors); the listener keeps going.
    private(set) var acceptFailures = 0

    init(loop: EventLoop, listener: TCPListener, tls: TLSServerContext, configuration: ServerConfiguration,
         accepted: @escaping (TransportConnection) -> Void) throws(TransportError) {
        self.loop = loop
        self.listener = listener
        self.tls = tls
        self.configuration = configuration
        self.parameters = configuration.quicParameters
        self.accepted = accepted
        try loop.register(fd: listener.fd, events: EventLoop.readable) { [weak self] _ in self?.acceptAll() }
    }

    var connectionCount: Int { drivers.count }

    private func acceptAll() {
        for _ in 0..<256 {
            let socket: TCPSocket
            do {
                guard let next = try listener.accept() else { return }
                socket = next
            } catch {
                acceptFailures += 1  // e.g. EMFILE: keep serving the connections we have
                return
            }
            guard drivers.count < configuration.maxConnections else {
                socket.close()  // over the limit: refuse at once rather than hold a half-open handshake
                continue
            }
            do {
                try adopt(socket)
            } catch {
                socket.close()
            }
        }
    }

    private func adopt(_ socket: TCPSocket) throws(TransportError) {
        let core = try QMuxOverTLS(server: tls, parameters: parameters, now: MonotonicClock.now())
        let driver = QMuxConnectionDriver(loop: loop, core: core, socket: socket, connected: true,
                                          datagramReceiveBuffer: configuration.datagramReceiveBuffer,
                                          datagramSendBuffer: configuration.datagramSendBuffer)
        let key = ObjectIdentifier(driver)
        drivers[key] = driver
        let remote = socket.remoteAddress.description
        let maximumMessageSize = configuration.maximumMessageSize
        driver.onHandshakeResult = { [weak self, unowned driver] result in
            guard let self, case .success = result else { return }
            accepted(TransportConnection(path: .tcp, remoteAddress: remote, resumption: .none, backend: driver,
                                         sinks: driver.sinks, maximumMessageSize: maximumMessageSize))
        }
        driver.onFinished = { [weak self] in self?.drivers[key] = nil }
        try driver.start()
    }

    /// Closes every connection with `code`.
    func shutdown(code: UInt64) {
        for driver in drivers.values { driver.closeSoon(code: code, reason: "server shutting down") }
    }

    /// Stops accepting and closes the listener.
    func closeListener() {
        loop.unregister(fd: listener.fd)
        listener.close()
        drivers.removeAll()
    }
}
