import TransportCore

/// Where the datagrams of a link's next connection go when an app reads `TransportLink.datagrams`: straight into
/// the link's mailbox on the event-loop thread, installed in the connection's driver before its first packet. So a
/// frame that arrives with the handshake's completion — a woken phone's 0.5-RTT catch-up — is readable in the loop
/// turn that read it, not after the connect's task, the link's task and a forwarding task have each run once; and
/// later frames cost one task hop (the reader's) instead of two.
///
/// One connection delivers: once the link took the connection (`attached`), frames from any other driver of the
/// attempt (the other address of a server, the losing transport of a race, closing) are dropped; before that every
/// driver's frames go through (a race's loser may have delivered a frame or two, as may a connection the link then
/// drops because it was suspended during the connect: like those of a retiring connection, they are audio the
/// relay sent).
final class LinkDatagramSink: Sendable {
    /// The driver of the connection the link took, and that connection, once `attached` ran.
    private let owner = Locked<(driver: ObjectIdentifier, connection: TransportConnection.ID)?>(nil)
    private let deliver: @Sendable (Datagram, TransportConnection.ID?) -> Void

    init(deliver: @escaping @Sendable (Datagram, TransportConnection.ID?) -> Void) { self.deliver = deliver }

    /// Loop side: the handler `driver` gets.
    func handler(for driver: AnyObject) -> @Sendable (Datagram) -> Void {
        let id = ObjectIdentifier(driver)
        return { [self] datagram in
            let (mine, connection) = owner.withLock { owner in
                guard let owner else { return (true, TransportConnection.ID?.none) }
                return (owner.driver == id, owner.connection)
            }
            if mine { deliver(datagram, connection) }
        }
    }

    /// The link took `connection`, made of `driver`: from now on only that driver's frames go through.
    func attached(driver: AnyObject, connection: TransportConnection.ID) {
        owner.withLock { $0 = (ObjectIdentifier(driver), connection) }
    }
}
