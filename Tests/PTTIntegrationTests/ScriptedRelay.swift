import PTTTransport
import TransportCore

/// A relay on QUIC and TCP (same port) that hands every control message a client sends to `handle`, with the
/// connection and stream it came on, so a test can script the server's side of a conversation.
enum ScriptedRelay {
    typealias Handler = @Sendable (TransportConnection, TransportStream, Message) async throws -> Void

    static func start(_ handle: @escaping Handler) async throws -> (TransportServer, ServerAddress, Task<Void, Never>) {
        var configuration = Fixtures.serverConfiguration()
        configuration.tcp = "127.0.0.1:0"
        // Both transports on one port number: retried on other ports when TCP finds the QUIC port taken.
        let server = try await Fixtures.bindOnStablePort(configuration)
        let relay = Task {
            await withDiscardingTaskGroup { group in
                for await connection in server.connections {
                    group.addTask { await serve(connection, handle) }
                }
            }
        }
        return (server, server.quicAddress!, relay)
    }

    private static func serve(_ connection: TransportConnection, _ handle: @escaping Handler) async {
        await withDiscardingTaskGroup { group in
            for await stream in connection.incomingStreams {
                group.addTask {
                    do {
                        for try await message in stream.messages { try await handle(connection, stream, message) }
                        try await stream.finish()
                    } catch {
                        stream.reset(code: 99)
                    }
                }
            }
        }
    }

    /// A client over `path` that trusts the test CA.
    static func client(_ path: TransportPath) -> TransportClient {
        TransportClient(
            configuration: ClientConfiguration(
                serverName: "localhost", trust: .caFile(Fixtures.ca), handshakeTimeout: .seconds(5),
                fallback: path == .tcp ? .tcpOnly : .quicOnly))
    }

    /// Messages framed back to back, for one write.
    static func framed(_ messages: [String]) -> [UInt8] {
        messages.flatMap { MessageFraming.frame(Array($0.utf8)) }
    }
}

extension Message {
    /// The bytes as UTF-8 text.
    var text: String { String(decoding: bytes, as: UTF8.self) }
}
