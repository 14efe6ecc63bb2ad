internal import CTransportShims

/// The NEW_CONNECTION_ID guard of one connection: reads every decrypted packet before ngtcp2 0.12.1 does and
/// refuses one whose NEW_CONNECTION_ID would make ngtcp2 retire a connection-ID sequence number a second time
/// (0.12.1 aborts the whole process there; fixed upstream in 1.4.0). A refusal closes only that connection,
/// with PROTOCOL_VIOLATION.
///
/// The rule: a NEW_CONNECTION_ID whose sequence number is below the largest `retire_prior_to` received so far,
/// and which names a sequence number seen before (0 always, 1 too on a client), is refused; one never seen is
/// let through (a frame delayed by reordering, which ngtcp2 retires once, correctly). The C side
/// (`ptt_ncid_guard.h`) explains why this covers every route to the abort.
///
/// - Important: Not thread-safe; used on the connection's thread only, like the connection.
package final class ConnectionIDGuard {
    /// Stable storage the decrypt callback reads through a thread-local pointer during `ngtcp2_conn_read_pkt`.
    let state: UnsafeMutablePointer<ptt_ncid_guard>

    /// A guard for a new connection of the given role.
    package init(isClient: Bool) {
        state = .allocate(capacity: 1)
        ptt_ncid_guard_init(state, isClient ? 1 : 0)
    }

    deinit { state.deallocate() }

    /// Reads one decrypted packet payload; false when the guard refuses it.
    package func admits(plaintext: [UInt8]) -> Bool {
        plaintext.withUnsafeBufferPointer { ptt_ncid_guard_check(state, $0.baseAddress, $0.count) == 0 }
    }

    /// The sequence number a refused packet tried to retire again, once one was refused.
    package var refusedSequence: UInt64? {
        state.pointee.refused != 0 ? state.pointee.refused_sequence : nil
    }

    /// The largest `retire_prior_to` read so far.
    package var retirePriorTo: UInt64 { state.pointee.retire_prior_to }

    /// Packets read so far.
    package var packetsChecked: UInt64 { state.pointee.packets_checked }
}
