extension TransportConnection {
    /// The received datagrams as the underlying stream, for readers isolated to an event loop (the fan-out relay,
    /// the benchmark's listeners). Iterated with `next(isolation:)` from an actor pinned to a loop, a datagram is
    /// handed over on that loop; `IncomingDatagrams`' iterator would hop to the global executor and back for each.
    ///
    /// - Important: One consumer at a time, shared with `datagrams` (it is the same stream).
    package var loopDatagrams: AsyncStream<Datagram> { datagrams.base }
}
