/// Who may take a stream's messages on the loop as they arrive, before any reader sees them: a relay acting on a
/// phone's 0-RTT requests in the turn that read them (`EarlyStreamTap`). What it leaves stays for the readers.
package struct EarlyMessageTaker {
    /// The largest message the stream accepts.
    package let maximumSize: Int
    /// Called under the stream's lock with each message now whole, in order, until it returns false (that message
    /// stays for the readers, with all after it). It must not read the stream, and must not wait.
    package let take: (Message) -> Bool
    /// Bytes taken out of the inbox: the peer's flow-control credit grows by this much.
    package let consumed: (Int) -> Void
}
