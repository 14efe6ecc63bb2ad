/// The value `body` produces, or nil if it takes longer than `limit` (`body` is then cancelled).
package func firstResult<T: Sendable>(
    within limit: Duration, _ body: @escaping @Sendable () async -> T?
) async -> T? {
    await withTaskGroup(of: T?.self) { group in
        group.addTask { await body() }
        group.addTask {
            try? await Task.sleep(for: limit)
            return nil
        }
        let first = await group.next() ?? nil
        group.cancelAll()
        return first
    }
}
