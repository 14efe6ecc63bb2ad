import PTTTransport
import TransportIO

/// The memory the supervisor shares with its workers so that the relay's limits hold for the relay
/// (`RelayWideState`): made before the first worker starts, its descriptor kept open for the workers to come.
final class RelayWideMemory: Sendable {
    let descriptor: Int32
    /// The supervisor's own mapping: it gives back what a dead worker held.
    let state: RelayWideState

    init(workers: Int, configuration: ServerConfiguration) throws {
        descriptor = try RelayWideState.create(
            RelayWideState.Sizing(
                workers: workers, maxConnections: configuration.maxConnections,
                maxPendingTCPHandshakes: configuration.maxPendingTCPHandshakes,
                zeroRTTGrants: configuration.earlyData.isEnabled ? configuration.earlyData.antiReplayCapacity : 1))
        state = try RelayWideState(descriptor: descriptor, worker: 0)
    }

    /// Worker `index`'s way in (the descriptor is renumbered when the worker starts).
    func share(worker index: Int) -> InheritedSockets.RelayWideShare { .init(descriptor: descriptor, worker: index) }
}
