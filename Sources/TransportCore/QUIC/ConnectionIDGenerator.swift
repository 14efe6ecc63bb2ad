/// Makes the connection IDs one side of a connection issues (its handshake source ID and NEW_CONNECTION_ID frames).
///
/// A server loop's `ConnectionIDIssuer` is one (the loop index, QUIC-LB); a connection given none issues IDs of
/// random bytes from its parameters' `RandomSource`. Used on the thread that owns the connection.
package protocol ConnectionIDGenerator: AnyObject {
    /// A fresh ID.
    func makeID() -> ConnectionID
}

extension ConnectionIDIssuer: ConnectionIDGenerator {}
