import TransportCore
import TransportIO

extension TransportClient {
    /// One connection attempt over either transport: on `loop`'s thread `make` creates the socket, the core and
    /// the driver (setting its callbacks), this gives the driver what `attempt` carries (the state to refresh, the
    /// early messages and datagrams) and `start` begins the handshake; this waits for the handshake and wraps the
    /// ready driver. A connect cancelled meanwhile closes the driver and throws `cancelled`.
    func handshake<Pump: ConnectionPump>(
        _ attempt: ConnectAttempt, on loop: EventLoop, path: TransportPath, remote: SocketAddress,
        make: @escaping @Sendable () throws -> ConnectionDriver<Pump>,
        start: @escaping @Sendable (ConnectionDriver<Pump>) throws -> Void
    ) async throws -> TransportConnection {
        typealias Driver = ConnectionDriver<Pump>
        let alpn = configuration.alpn
        let driverBox = Locked<Driver?>(nil)
        let driver = try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Driver, any Error>) in
                loop.execute {
                    do {
                        let driver = try make()
                        driverBox.withLock { $0 = driver }
                        if let sink = attempt.datagramSink {  // before its first packet: no frame goes elsewhere
                            driver.installDatagramHandler(sink.handler(for: driver))
                        }
                        driver.tracker = ResumptionTracker(
                            host: attempt.identity.host, port: attempt.identity.port, alpn: alpn,
                            path: path, previous: attempt.saved?.blob)
                        driver.startEarly(
                            messages: attempt.earlyMessages, datagrams: attempt.earlyDatagrams,
                            diagnostic: attempt.diagnostic)
                        let first = driver.onHandshakeResult
                        driver.onHandshakeResult = { result in
                            first?(result)
                            continuation.resume(with: result.map { driver })
                        }
                        try start(driver)
                    } catch {
                        continuation.resume(throwing: error)
                    }
                } orIfStopped: {
                    continuation.resume(throwing: TransportError(.cancelled, "the event loop has stopped"))
                }
            }
        } onCancel: {
            driverBox.withLock { $0 }?.closeSoon(code: 0, reason: "connect cancelled")
        }
        if Task.isCancelled {
            driver.closeSoon(code: 0, reason: "connect cancelled")
            throw TransportError(.cancelled, "the connect was cancelled")
        }
        return TransportConnection(
            path: path, remoteAddress: remote.description, backend: driver,
            sinks: driver.sinks, maximumMessageSize: configuration.maximumMessageSize,
            earlyStream: driver.earlyStream, resumptionDiagnostic: driver.resumptionDiagnostic)
    }
}
