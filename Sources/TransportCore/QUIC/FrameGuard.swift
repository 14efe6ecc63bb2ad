internal import CTransportShims

/// The frame guard of one connection: reads every packet the connection decrypts before ngtcp2 0.12.1 acts on it,
/// and every 1-RTT packet it encrypts, so that no packet from the peer reaches one of 0.12.1's process-wide aborts.
/// A refusal closes only that connection.
///
/// - A NEW_CONNECTION_ID that would make ngtcp2 retire a connection-ID sequence number a second time is refused
///   (PROTOCOL_VIOLATION): one whose number is below the largest `retire_prior_to` received and was seen before.
///   Only where the linked ngtcp2 aborts on it (before 1.4.0; `checksRetirements`).
/// - A client refuses a server's NEW_CONNECTION_ID with `retire_prior_to` above 0 until the handshake is confirmed
///   (PROTOCOL_VIOLATION), where the linked ngtcp2 (before 1.22.0) aborts on a 0.5-RTT retirement.
/// - A TLS message in a 1-RTT CRYPTO frame is refused (CRYPTO_ERROR, unexpected_message; RFC 9001 §6): every one at
///   a server, every one but NewSessionTicket at a client. A client drops a packet whose CRYPTO data starts past a
///   gap (the server sends it again), so each byte is judged in order.
/// - For the path rules (`QUICConnection+FrameGuard.swift`) it records the PATH_RESPONSEs of the packet read last,
///   the PATH_CHALLENGEs the connection sent in packets under 1,200 bytes, and how many sequence numbers the peer
///   could have made ngtcp2 hold.
///
/// The C side (`ptt_frame_guard.h`) explains why this covers every route to the aborts.
///
/// - Important: Not thread-safe; used on the connection's thread only, like the connection.
package final class FrameGuard {
    /// Stable storage the guarded callbacks read through a thread-local pointer during ngtcp2's reads and writes.
    let state: UnsafeMutablePointer<ptt_frame_guard>

    /// A guard for a new connection of the given role. `checksRetirements`: refuse a NEW_CONNECTION_ID that would
    /// retire a sequence number again (needed below ngtcp2 1.4.0, which aborts on it; from 1.4.0 ngtcp2 skips it).
    /// `awaitsConfirmation` (client): refuse a `retire_prior_to` above 0 until `handshakeConfirmed()` (needed below
    /// ngtcp2 1.22.0, whose client aborts when a server retires the handshake's connection ID in 0.5-RTT).
    package init(isClient: Bool, checksRetirements: Bool = true, awaitsConfirmation: Bool = true) {
        state = .allocate(capacity: 1)
        ptt_frame_guard_init(state, isClient ? 1 : 0)
        state.pointee.checks_retirements = checksRetirements ? 1 : 0
        state.pointee.awaits_confirmation = isClient && awaitsConfirmation ? 1 : 0
    }

    /// The handshake is confirmed (client: HANDSHAKE_DONE arrived): the server may retire connection IDs.
    package func handshakeConfirmed() { state.pointee.awaits_confirmation = 0 }

    deinit { state.deallocate() }

    /// What the guard decides about one decrypted packet.
    package enum Verdict: Equatable, Sendable {
        /// ngtcp2 may process it.
        case pass
        /// The connection must close (see `refusal`).
        case refuse
        /// ngtcp2 should discard it unread, as it does a packet that fails decryption.
        case drop
    }

    /// Why a packet was refused.
    package enum Refusal: Equatable, Sendable {
        /// A NEW_CONNECTION_ID would retire this sequence number a second time.
        case retiresAgain(sequence: UInt64)
        /// A TLS message of this handshake type (24: KeyUpdate) in a 1-RTT CRYPTO frame.
        case tlsMessageIn1RTT(type: UInt8)
        /// Client: a server's NEW_CONNECTION_ID with this `retire_prior_to` before the handshake was confirmed.
        case retiresBeforeConfirmation(retirePriorTo: UInt64)
    }

    /// Reads one decrypted packet payload (`shortHeader`: a 1-RTT packet).
    package func check(plaintext: [UInt8], shortHeader: Bool = true) -> Verdict {
        let rv = plaintext.withUnsafeBufferPointer {
            ptt_frame_guard_check(state, $0.baseAddress, $0.count, shortHeader ? 1 : 0)
        }
        switch rv {
        case Int32(PTT_FRAME_GUARD_PASS): return .pass
        case Int32(PTT_FRAME_GUARD_DROP): return .drop
        default: return .refuse
        }
    }

    /// Reads one 1-RTT payload the connection sends, in a packet of `packetSize` bytes.
    package func noteSent(plaintext: [UInt8], packetSize: Int) {
        plaintext.withUnsafeBufferPointer { ptt_frame_guard_note_sent(state, $0.baseAddress, $0.count, packetSize) }
    }

    /// Why the guard refused a packet, once it did.
    package var refusal: Refusal? {
        switch Int32(state.pointee.refused) {
        case Int32(PTT_FRAME_GUARD_RETIRES_AGAIN): return .retiresAgain(sequence: state.pointee.refused_sequence)
        case Int32(PTT_FRAME_GUARD_TLS_IN_1RTT): return .tlsMessageIn1RTT(type: state.pointee.refused_tls_type)
        case Int32(PTT_FRAME_GUARD_RETIRES_EARLY):
            return .retiresBeforeConfirmation(retirePriorTo: state.pointee.refused_sequence)
        default: return nil
        }
    }

    /// Whether the connection sent a PATH_CHALLENGE since the last call (a path validation of ngtcp2's runs).
    package func takeSentPathChallenge() -> Bool {
        defer { state.pointee.sent_path_challenge = 0 }
        return state.pointee.sent_path_challenge != 0
    }

    /// The largest `retire_prior_to` read so far.
    package var retirePriorTo: UInt64 { state.pointee.retire_prior_to }

    /// How many connection-ID sequence numbers the peer could have made ngtcp2 hold (an upper bound).
    package var sequenceNumbersSeen: UInt64 { ptt_frame_guard_seen_count(state) }

    /// Whether a PATH_RESPONSE of the packet read last answers a PATH_CHALLENGE sent in an undersized packet.
    package var answeredUndersizedChallenge: Bool { ptt_frame_guard_answered_undersized(state) != 0 }

    /// Whether a PATH_RESPONSE drops the packets read until this is set again.
    package var dropsPathResponses: Bool {
        get { state.pointee.drop_path_responses != 0 }
        set { state.pointee.drop_path_responses = newValue ? 1 : 0 }
    }

    /// Whether a NEW_CONNECTION_ID drops the packets read until this is set again.
    package var dropsNewConnectionIDs: Bool {
        get { state.pointee.drop_new_connection_ids != 0 }
        set { state.pointee.drop_new_connection_ids = newValue ? 1 : 0 }
    }

    /// Whether the packet read last carried a PATH_CHALLENGE.
    package var readPathChallenge: Bool { state.pointee.read_path_challenge != 0 }

    /// Remembers the destination connection ID of the 1-RTT packet that made a path change.
    package func noteEpisodeDestinationID(of packet: UnsafeRawBufferPointer, idLength: Int) {
        ptt_frame_guard_note_episode_dcid(
            state, packet.baseAddress?.assumingMemoryBound(to: UInt8.self), packet.count, idLength)
    }

    /// Whether a packet's destination connection ID is the one of the packet that made the last path change.
    package func hasEpisodeDestinationID(_ packet: UnsafeRawBufferPointer) -> Bool {
        ptt_frame_guard_has_episode_dcid(state, packet.baseAddress?.assumingMemoryBound(to: UInt8.self), packet.count)
            != 0
    }

    /// Forgets the undersized challenges sent so far (a new path validation starts).
    package func forgetChallenges() { ptt_frame_guard_forget_challenges(state) }

    /// Packets read so far.
    package var packetsChecked: UInt64 { state.pointee.packets_checked }

    /// Packets dropped so far.
    package var packetsDropped: UInt64 { state.pointee.packets_dropped }
}
