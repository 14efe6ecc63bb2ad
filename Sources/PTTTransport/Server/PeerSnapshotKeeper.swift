import Foundation
import TransportCore
import TransportIO

/// Keeps `ServerConfiguration.peerSnapshotFile`: at start, tells every QUIC client of the previous run (a crashed or
/// killed relay) that its connection is gone — one stateless reset per connection ID it held, from the address it
/// talked to, within `RestartResets`' bounds — so each reconnects at once; then rewrites the file when the relay's
/// QUIC peers changed, at most once per `interval`. A graceful shutdown removes the file (its clients got
/// CONNECTION_CLOSE).
///
/// The previous run's snapshot is used once: the file is emptied before any reset leaves, so a relay that crashes
/// again (and again) sends nothing more for the same connections. A worker of `serve --workers` keeps a file of its
/// own (`peerSnapshotPath`), so a restarted worker resets only its own clients.
///
/// A client that connected within the last `interval` before a crash is not in the file: it learns of the restart
/// when it next sends (audio, a message, or its keep-alive), as without a snapshot.
final class PeerSnapshotKeeper: Sendable {
    let path: String
    private let writer = Locked<Task<Void, Never>?>(nil)

    init(path: String) { self.path = path }

    /// The previous run's peers (nil: no file, or it could not be emptied), taken from the file, which is left
    /// holding an empty snapshot. A file that is not a snapshot is reported on stderr and ignored: it only speeds up
    /// the clients' reconnect, it never keeps a relay from starting.
    func takePreviousPeers() -> PeerSnapshot? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        guard Self.replace(path, with: PeerSnapshot(peers: []).encoded()) else {
            // Sending without emptying the file would send again after the next crash.
            Self.report("cannot empty peer snapshot \(path) (\(String(cString: strerror(errno)))): no resets sent")
            return nil
        }
        do {
            return try PeerSnapshot(decoding: String(decoding: data, as: UTF8.self))
        } catch {
            Self.report("ignoring peer snapshot \(path): \(error)")
            return nil
        }
    }

    /// Sends `plan`'s resets through `driver`'s socket, 256 a loop turn; returns how many were sent.
    static func announceRestart(
        _ plan: RestartResets, secret: [UInt8], through driver: LoopBound<QUICServerDriver?>
    ) async -> Int {
        var sent = 0
        let resets = plan.resets
        for chunk in stride(from: 0, to: resets.count, by: 256) {
            let part = resets[chunk..<min(chunk + 256, resets.count)]
            sent +=
                (try? await driver.loop.submit { () -> Int in
                    guard let socket = driver.value?.socket else { return 0 }
                    var count = 0
                    for reset in part {
                        guard
                            let packet = StatelessReset.packet(
                                secret: driver.value?.endpoint.resetSecret(for: reset.id) ?? secret, cid: reset.id,
                                length: RestartResets.resetLength)
                        else { continue }
                        let failed = packet.withUnsafeBytes {
                            socket.send($0, to: reset.remote, from: reset.local, ecn: 0)
                        }
                        if failed == nil { count += 1 }
                    }
                    return count
                }) ?? 0
        }
        return sent
    }

    /// Starts rewriting the file every `interval` when `peers()` changed.
    func startWriting(interval: Duration, peers: @escaping @Sendable () async -> PeerSnapshot) {
        let path = path
        let task = Task.detached(priority: .utility) {
            var written: String?
            while !Task.isCancelled {
                let text = await peers().encoded()
                if text != written, Self.replace(path, with: text) { written = text }
                try? await Task.sleep(for: interval)
            }
        }
        writer.withLock { $0 = task }
    }

    /// Stops writing and removes the file (the clients were closed properly).
    func stop() async {
        let task = writer.withLock { $0 }
        task?.cancel()
        await task?.value
        try? FileManager.default.removeItem(atPath: path)
    }

    /// Writes `text` next to `path` (mode 0600: it lists the clients' addresses) and renames it over `path` (a
    /// reader never sees half a file).
    private static func replace(_ path: String, with text: String) -> Bool {
        let temporary = path + ".new"
        guard
            FileManager.default.createFile(
                atPath: temporary, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600])
        else { return false }
        return rename(temporary, path) == 0
    }

    private static func report(_ line: String) {
        FileHandle.standardError.write(Data("ptt-transport: \(line)\n".utf8))
    }
}

/// What a relay restarted with a peer snapshot sent its previous run's clients (`TransportServer.restartResets`).
package struct RestartResetReport: Sendable, Equatable {
    /// Stateless resets sent.
    package var sent = 0
    /// The addresses they went to.
    package var addresses = 0
    /// Resets left out (over three times what an address sent, eight per connection, or the restart's limit).
    package var withheld = 0
}

extension TransportServer {
    /// Starts keeping the peer snapshot at `path` (see `PeerSnapshotKeeper`): the resets for the previous run's
    /// peers first, then the writer, every second. A relay without QUIC keeps none.
    func keepPeerSnapshot(at path: String, secret: [UInt8], maxConnections: Int) async {
        guard quicAddress != nil, let first = quic.first else { return }
        let keeper = PeerSnapshotKeeper(path: path)
        if let previous = keeper.takePreviousPeers() {
            let connections = min(max(1, maxConnections), 1 << 32)
            let plan = RestartResets(for: previous, limit: connections * RestartResets.idsPerConnection)
            let sent = await PeerSnapshotKeeper.announceRestart(plan, secret: secret, through: first)
            restartResets.withLock {
                $0 = RestartResetReport(sent: sent, addresses: plan.addresses, withheld: plan.withheld)
            }
        }
        let drivers = quic
        keeper.startWriting(interval: .seconds(1)) {
            var peers: [PeerSnapshot.Peer] = []
            for driver in drivers { peers += (try? await driver.loop.submit { driver.value?.peers() ?? [] }) ?? [] }
            return PeerSnapshot(peers: peers)
        }
        peerSnapshot.withLock { $0 = keeper }
    }
}
