import TransportCore
import TransportIO

/// The request channel of one of a link's connections (numbered like `LinkConnection`).
struct LinkRequests: Sendable {
    let id: UInt64
    /// Opens the stream once; every request on this connection awaits the same channel.
    let channel: Task<RequestChannel, any Error>
}

extension LinkEngine {
    /// The error a stopped link answers with.
    func stoppedError(_ state: LinkState) -> TransportError? {
        guard state.stopped else { return nil }
        return state.stopError ?? TransportError(.connectionClosed, "the link was stopped")
    }

    /// Sends on the ready connection; drops and counts the frame while there is none.
    func sendDatagram(_ payload: [UInt8], expiresAfter: Duration?) throws {
        let (connection, stopped) = state.withLock { ($0.connection?.connection, stoppedError($0)) }
        if let stopped { throw stopped }
        try datagramPath.send(payload, expiresAfter: expiresAfter, on: connection)
    }

    /// Waits for a ready connection and asks on its request channel (opened by the first request on it).
    func request(_ message: [UInt8]) async throws -> [UInt8] {
        let current = try await nextReady(minimumID: 0)
        let opening = state.withLock { state -> Task<RequestChannel, any Error> in
            if let requests = state.requests, requests.id == current.id { return requests.channel }
            let channel = Task { RequestChannel(stream: try await current.connection.openStream()) }
            state.requests = LinkRequests(id: current.id, channel: channel)
            return channel
        }
        return try await opening.value.request(message)
    }
}
