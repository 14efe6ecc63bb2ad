extension TransportConnection {
    /// The connection's first resumption state (its current one if it has one), or nil if none comes within
    /// `limit` or the connection closes first. For a caller that must save state right after connecting (a link
    /// suspended at once, `connect --session-file`).
    package func firstResumptionState(within limit: Duration) async -> ResumptionState? {
        await firstResult(within: limit) {
            for await state in self.resumptionStates { return state }
            return nil
        }
    }
}
