/// Which connection a link-wide reader (datagrams, notices) must start reading: none until an app reads the link's
/// sequence, then the ready connection and each later one, once each. Kept under its owner's lock.
struct LinkFollower {
    /// Someone reads the link's sequence: follow every connection.
    private var wanted = false
    /// The link's ready connection, while there is one.
    private var current: TransportConnection?
    /// The connection being read (at most one reader per connection).
    private var following: TransportConnection.ID?

    /// Whether an app reads the link's sequence.
    var isWanted: Bool { wanted }

    /// The link has a new ready connection: the one to start reading now, if any. `followedAlready`: its frames
    /// reach the link's sequence by other means (a sink installed in its driver), so nobody must read it.
    mutating func attach(_ connection: TransportConnection, followedAlready: Bool = false) -> TransportConnection? {
        current = connection
        if followedAlready { following = connection.id }
        return claim()
    }

    /// The link's connection ended (or was replaced).
    mutating func detach(_ connection: TransportConnection) {
        if current === connection { current = nil }
    }

    /// An app reads the link's sequence: the connection to start reading now, if any.
    mutating func want() -> TransportConnection? {
        wanted = true
        return claim()
    }

    /// The current connection when it is wanted and nobody reads it yet (it is then marked as read).
    private mutating func claim() -> TransportConnection? {
        guard wanted, let current, following != current.id else { return nil }
        following = current.id
        return current
    }
}
