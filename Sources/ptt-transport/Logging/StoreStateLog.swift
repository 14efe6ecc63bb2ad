import PTTTransport

/// Logs the shared anti-replay store's state as it changes: `answering` once it has answered, `unavailable` while
/// claims are refused because it cannot answer in time (0-RTT refused, counted), `never_answered` while it has not
/// answered since the start. The first state is logged before `start` returns, the changes twice a second after.
/// Nothing without a store.
enum StoreStateLog {
    static func start(_ server: TransportServer) async -> Task<Void, Never>? {
        guard server.antiReplayStoreAnswered != nil else { return nil }
        var last = ""
        var before = await server.antiReplayStatistics().refusedStoreUnavailable
        await check(server, last: &last, before: &before)
        return Task { [last, before] in
            var last = last
            var before = before
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(500))
                await check(server, last: &last, before: &before)
            }
        }
    }

    private static func check(_ server: TransportServer, last: inout String, before: inout UInt64) async {
        let unavailable = await server.antiReplayStatistics().refusedStoreUnavailable
        let state =
            unavailable > before
            ? "unavailable" : server.antiReplayStoreAnswered == true ? "answering" : "never_answered"
        before = unavailable
        let error = state == "answering" ? nil : server.antiReplayStoreError
        let key = state + (error.map { " " + $0.description } ?? "")
        guard key != last else { return }
        last = key
        var fields: [String: Any] = ["state": state, "refused_store_unavailable": Int(unavailable)]
        if let error {  // what to fix: TLS verification, the wrong kind of port, AUTH refused
            fields["error"] = error.message
            fields["code"] = error.code.name
        }
        if state == "answering" {
            RelayLog.info("anti_replay_store", fields)
        } else {
            RelayLog.warning("anti_replay_store", fields)
        }
    }
}
