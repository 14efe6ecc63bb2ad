import Foundation
import PTTTalkGroups
import PTTTransport
import TransportCore
import TransportIO

/// Our relay on 127.0.0.1 for the QMux cases: TCP only, on a loop of its own, each connection echoed as
/// `ptt-transport serve` does without `--events` (every byte of a client-opened stream and every datagram sent
/// back, whatever the bytes are, so a peer that does not use our message framing is echoed too), or only read.
/// It keeps what it saw: each connection's path and how each ended.
final class LoopbackRelay: Sendable {
    let server: TransportServer
    let address: ServerAddress
    private let loop: EventLoop
    private let task: Task<Void, Never>
    private let seen = Locked((paths: [TransportPath](), closes: [String]()))
    /// One element each time `seen` changes (the newest kept): what `wait` sleeps on.
    private let changes: AsyncStream<Void>

    /// Starts the relay. With `greeting`, it sends that datagram to each connection as soon as the connection is
    /// up, before echoing anything (the QMux datagram case's frame from our side). With `echo` false it reads every
    /// stream and answers nothing, so the connection stays up until the client ends it.
    static func start(
        options: MatrixOptions, greeting: [UInt8]? = nil, echo: Bool = true
    ) async throws
        -> LoopbackRelay
    {
        let loop = try EventLoop(name: "matrix-qmux-relay")
        do {
            let (server, address) = try await OurRelay.bind(
                loop: loop, host: "127.0.0.1", port: 0, options: options, tcp: true, udp: false)
            return LoopbackRelay(server: server, address: address, loop: loop, greeting: greeting, echo: echo)
        } catch {
            loop.shutdown()
            throw error
        }
    }

    private init(server: TransportServer, address: ServerAddress, loop: EventLoop, greeting: [UInt8]?, echo: Bool) {
        self.server = server
        self.address = address
        self.loop = loop
        let (changes, changed) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        self.changes = changes
        let seen = seen
        task = Task {
            await server.handleEachConnection { connection in
                seen.withLock { $0.paths.append(connection.path) }
                changed.yield()
                if let greeting { try? connection.sendDatagram(greeting) }
                if echo {
                    await EchoRelay.serve(connection)
                } else {
                    await Self.read(connection)
                }
                let reason = (try? await connection.closed()).map { "\($0)" } ?? "cancelled"
                seen.withLock { $0.closes.append(reason) }
                changed.yield()
            }
            changed.finish()
        }
    }

    /// Reads every stream the client opens, to its end, and sends nothing.
    private static func read(_ connection: TransportConnection) async {
        await withDiscardingTaskGroup { group in
            for await stream in connection.incomingStreams {
                group.addTask { _ = try? await stream.chunks.reduce(0) { $0 + $1.bytes.count } }
            }
        }
        _ = try? await connection.closed()
    }

    /// The path of every connection that completed its handshake, in order.
    var paths: [TransportPath] { seen.withLock { $0.paths } }

    /// The paths once `count` connections completed their handshake, waiting up to `timeout` (the client's connect
    /// can return before the relay's side of the same connection is handed over).
    func paths(count: Int, within timeout: Duration) async -> [TransportPath] {
        await wait(within: timeout) { $0.paths.count >= count }
        return paths
    }

    /// How the first connection ended, waiting up to `timeout` for it; nil if it is still open then.
    func firstClose(within timeout: Duration) async -> String? {
        await wait(within: timeout) { !$0.closes.isEmpty }
        return seen.withLock { $0.closes.first }
    }

    /// Returns once `done` holds for what the relay saw, or after `timeout`.
    private func wait(
        within timeout: Duration, until done: @escaping @Sendable ((paths: [TransportPath], closes: [String])) -> Bool
    ) async {
        let seen = seen
        let changes = changes
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                if seen.withLock({ done($0) }) { return }
                for await _ in changes where seen.withLock({ done($0) }) { return }
            }
            group.addTask { try? await Task.sleep(for: timeout) }
            await group.next()
            group.cancelAll()
        }
    }

    func stop() async {
        await server.shutdown()
        task.cancel()
        loop.shutdown()
    }
}
