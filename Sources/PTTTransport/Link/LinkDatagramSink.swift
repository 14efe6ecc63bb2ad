import TransportCore

/// Where the datagrams of a link's next connection go when an app reads `TransportLink.datagrams`: straight into
/// the link's mailbox on the event-loop thread, installed in the connection's driver before its first packet. So a
/// frame that arrives with the handshake's completion — a woken phone's 0.5-RTT catch-up — is readable in the loop
/// turn that read it, not after the connect's task, the link's task and a forwarding task have each run once; and
/// later frames cost one task hop (the reader's) instead of two.
///
/// One connection delivers: the first driver to hand a frame claims the sink (the other address of a server, or
/// the losing transport of a race, delivers nothing). A connection the link then drops (suspended during the
/// connect) may have delivered a frame or two: like those of a retiring connection, they are audio the relay sent.
final class LinkDatagramSink: Sendable {
    private let claimed = Locked<ObjectIdentifier?>(nil)
    /// The connection the link made of the claiming driver, once `attach` saw it.
    private let connection = Locked<TransportConnection.ID?>(nil)
    private let deliver: @Sendable (Datagram, TransportConnection.ID?) -> Void

    init(deliver: @escaping @Sendable (Datagram, TransportConnection.ID?) -> Void) { self.deliver = deliver }

    /// Loop side: the handler `driver` gets.
    func handler(for driver: AnyObject) -> @Sendable (Datagram) -> Void {
        let id = ObjectIdentifier(driver)
        return { [self] datagram in
            let mine = claimed.withLock { owner in
                if owner == nil { owner = id }
                return owner == id
            }
            if mine { deliver(datagram, connection.withLock { $0 }) }
        }
    }

    /// The link made `made` of the driver that claims (or will claim) the sink.
    func attached(_ made: TransportConnection.ID) { connection.withLock { $0 = made } }
}
