import PTTTransport
import TransportCore

/// What the echo relay observed, for `serve --events` and for tests.
public enum RelayEvent: Sendable {
    /// A connection completed its handshake.
    case handshakeCompleted(remote: String, path: TransportPath)
    /// A framed control message passed through (decoded from the echoed bytes).
    case message(remote: String, stream: Int64, bytes: Int, isEarly: Bool)
    /// A datagram was echoed.
    case datagram(remote: String, bytes: Int, isEarly: Bool)
    /// The peer's address changed mid-connection (a NAT rebinding): the relay now sends to `to`.
    case pathChanged(from: String, to: String)
    /// The connection ended.
    case closed(remote: String, reason: CloseReason)
    /// The relay ended a stream because the peer broke its framing: a length prefix above the connection's
    /// maximum message size (`messageTooLarge`). The stream was reset and stopped with `messageTooLargeCode`; the
    /// connection and its other streams go on.
    case streamRefused(remote: String, stream: Int64, error: TransportError)
}

/// The reference relay behind `ptt-transport serve`: every byte on a client-opened stream is written back on
/// that stream (FIN too), every datagram is sent back. Useful as a test peer and for measurements.
public enum EchoRelay {
    /// Serves every connection of `server` until the server shuts down.
    ///
    /// Without `events`, each connection's echo runs on its own event loop, so the relay's work for a packet never
    /// hops to another thread. With `events`, it runs on the global executor instead, so a callback that blocks
    /// (printing to a full pipe, say) never stalls the loop.
    public static func run(_ server: TransportServer, events: (@Sendable (RelayEvent) -> Void)? = nil) async {
        await server.handleEachConnection(onConnectionLoop: events == nil) { connection in
            await serve(connection, events: events)
        }
    }

    /// Echoes one connection until it closes.
    public static func serve(_ connection: TransportConnection, events: (@Sendable (RelayEvent) -> Void)? = nil) async {
        let remote = connection.remoteAddress
        events?(.handshakeCompleted(remote: remote, path: connection.path))
        await withDiscardingTaskGroup { group in
            if let events {
                group.addTask {
                    var previous: String?
                    for await address in connection.remoteAddresses {
                        if let previous, previous != address { events(.pathChanged(from: previous, to: address)) }
                        previous = address
                    }
                }
            }
            group.addTask {
                for await datagram in connection.datagrams {
                    try? connection.sendDatagram(datagram.payload)
                    events?(.datagram(remote: remote, bytes: datagram.payload.count, isEarly: datagram.isEarly))
                }
            }
            group.addTask {
                await withDiscardingTaskGroup { streams in
                    for await stream in connection.incomingStreams {
                        streams.addTask { await echo(stream, remote: remote, events: events) }
                    }
                }
            }
            if let reason = try? await connection.closed() { events?(.closed(remote: remote, reason: reason)) }
        }
    }

    /// Echoes one stream. With `events`, it also decodes the stream's messages to report them, with a decoder
    /// capped at the connection's `maximumMessageSize`: a prefix above it ends the stream (`messageTooLargeCode`
    /// both ways, a `streamRefused` event) and none of its bytes are kept or echoed.
    private static func echo(
        _ stream: TransportStream, remote: String,
        events: (@Sendable (RelayEvent) -> Void)?
    ) async {
        var decoder = MessageDecoder(maximumSize: stream.connection.maximumMessageSize)
        do {
            for try await chunk in stream.chunks {
                if let events {
                    let messages: [[UInt8]]
                    do {
                        messages = try decoder.feed(chunk.bytes)
                    } catch {
                        stream.reset(code: messageTooLargeCode)
                        events(.streamRefused(remote: remote, stream: stream.id, error: error))
                        return
                    }
                    for message in messages {
                        events(
                            .message(remote: remote, stream: stream.id, bytes: message.count, isEarly: chunk.isEarly))
                    }
                }
                try await stream.write(chunk.bytes)
            }
            try await stream.finish()
        } catch {
            stream.reset(code: 0)
        }
    }
}
