import PTTTransport
import TransportCore

/// What the relay knows of each connection it serves, shared by the loop (which may act on a 0-RTT join and
/// catch-up in the turn they arrived, before the connection reaches a task) and the connection's tasks: the user
/// it joined as, and one outbox per stream (so replies and floor notices on a stream keep one order, whoever
/// queued them).
final class RelayConnections: Sendable {
    /// One connection's share.
    final class Entry: Sendable {
        /// The user the connection joined as (nil: none yet, or it left).
        let joined = Locked<MemberIdentity?>(nil)
        /// The user it joined as when its phone speaks protocol revision 1 (shared by its outboxes).
        let firstRevisionUser = Locked<MemberIdentity?>(nil)
        fileprivate let outboxes = Locked<[Int64: StreamOutbox]>([:])
    }

    private let entries = Locked<[TransportConnection.ID: Entry]>([:])

    /// `connection`'s entry, made on first use.
    func entry(_ connection: TransportConnection) -> Entry {
        entries.withLock { entries in
            if let entry = entries[connection.id] { return entry }
            let entry = Entry()
            entries[connection.id] = entry
            return entry
        }
    }

    /// The outbox of `stream` (a stream of `entry`'s connection), made on first use.
    func outbox(_ stream: TransportStream, in entry: Entry) -> StreamOutbox {
        entry.outboxes.withLock { outboxes in
            if let outbox = outboxes[stream.id] { return outbox }
            let outbox = StreamOutbox(stream, firstRevisionUser: entry.firstRevisionUser)
            outboxes[stream.id] = outbox
            return outbox
        }
    }

    /// The stream's reader is done with it: its outbox sends what it holds, then nothing more.
    func finish(_ stream: TransportStream, in entry: Entry) {
        entry.outboxes.withLock { $0.removeValue(forKey: stream.id) }?.finish()
    }

    /// The connection ended: its entry goes.
    func remove(_ connection: TransportConnection) {
        _ = entries.withLock { $0.removeValue(forKey: connection.id) }
    }
}
