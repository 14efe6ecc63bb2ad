/*
 * The frame guard: reads every packet a connection decrypts before ngtcp2 0.12.1 acts on it, and every 1-RTT packet
 * it encrypts, so that no sequence of packets from a peer reaches one of 0.12.1's process-wide aborts. It never
 * changes a packet and never keeps a pointer into one. Three jobs:
 *
 * 1. Connection-ID retirement (NEW_CONNECTION_ID). `ngtcp2_conn_track_retired_dcid_seq` aborts
 *    (`ngtcp2_unreachable`, unconditional) when asked to retire a sequence number whose earlier retirement the peer
 *    has not acknowledged. Retirements come by two routes:
 *    (a) a NEW_CONNECTION_ID whose sequence number is below the largest retire_prior_to received so far (R): ngtcp2
 *        retires it at once without checking whether it already did. The guard refuses such a frame when it has seen
 *        the number before (0 from the start, 1 too on a client, every other one in a NEW_CONNECTION_ID), and lets
 *        an unseen one through (a frame delayed by reordering, retired once, correctly). Its memory of seen numbers
 *        is a bounded set of ranges that, when full, merges a gap (counts it as seen): it may refuse more, never less.
 *    (b) the IDs ngtcp2 holds (current, spare, bound to a path, a path validation's own and its fallback), retired
 *        when R passes them, on a path change, or when a validation ends. ngtcp2 admits a number into what it holds
 *        at most once and drops an ID when it retires it, except where a path validation holds a copy of an ID that
 *        is also held elsewhere: a second path change while a validation runs (the new one inherits the old one's
 *        fallback, whose number the old one's end retires), a change to a new ID while ngtcp2 silently re-validates
 *        the old path under the current ID, a retire_prior_to replacing a running validation's IDs. The path rules
 *        (PathChangeRules.swift, applied in QUICConnection+FrameGuard.swift) keep every such packet away from
 *        ngtcp2, using what this guard records (job 3); the list and the argument are written out there. (Since
 *        1.4.0 ngtcp2 itself skips a number it already retired.)
 *    Every number is therefore retired at most once, so the retirements a connection can ever make are at most the
 *    numbers it has seen (`ptt_frame_guard_seen_count`); 0.12.1 keeps 16 unacknowledged retirements and asserts when
 *    a path change needs a 17th, so the path rules also refuse path changes once more than 16 numbers were seen.
 * 2. TLS messages in 1-RTT (RFC 9001 section 6: a KeyUpdate is a connection error; GnuTLS 3.7.9 would process it and
 *    make ngtcp2 install a 1-RTT key twice, an assertion). A server refuses every CRYPTO frame in a 1-RTT packet (a
 *    client has no post-handshake message to send in QUIC); a client accepts only NewSessionTicket messages there,
 *    reading the stream in order (data past a gap drops the packet, which the server then sends again).
 * 3. What the path rules need (job 1, route b): the PATH_RESPONSE data in the packet being read, and the
 *    PATH_CHALLENGE data the connection sent in 1-RTT packets smaller than 1,200 bytes (ngtcp2 validates a path
 *    answered through such a challenge a second time, with another validation that may fall back).
 */
#ifndef PTT_FRAME_GUARD_H
#define PTT_FRAME_GUARD_H

#include <stddef.h>
#include <stdint.h>
#include <ngtcp2/ngtcp2.h>

/* How many disjoint ranges of seen sequence numbers a guard keeps before it merges the lowest gap. */
#define PTT_FRAME_GUARD_RANGES 16
/* PATH_RESPONSEs remembered from the packet being read, and undersized PATH_CHALLENGEs from the packets written. */
#define PTT_FRAME_GUARD_RESPONSES 8
#define PTT_FRAME_GUARD_UNDERSIZED 16
/* ngtcp2 pads a PATH_CHALLENGE packet to this size unless anti-amplification leaves less room. */
#define PTT_FRAME_GUARD_FULL_PROBE 1200

/* Why a packet was refused (the connection is closed with the matching error). */
enum {
  PTT_FRAME_GUARD_ADMITTED = 0,
  PTT_FRAME_GUARD_RETIRES_AGAIN = 1, /* NEW_CONNECTION_ID retiring a sequence number again: PROTOCOL_VIOLATION */
  PTT_FRAME_GUARD_TLS_IN_1RTT = 2,   /* a TLS message QUIC forbids in 1-RTT: CRYPTO_ERROR(unexpected_message) */
  PTT_FRAME_GUARD_RETIRES_EARLY = 3, /* client: a retire_prior_to before the handshake is confirmed: PROTOCOL_VIOLATION */
};

typedef struct ptt_frame_guard {
  int is_client;
  /* Job 1 route (a) is on (the default): clear it when the linked ngtcp2 skips a number it already retired (1.4.0
   * and later), where refusing would only close connections whose peer legitimately repeated a frame. */
  int checks_retirements;
  /* Client, until the handshake is confirmed (set by the caller): a NEW_CONNECTION_ID with retire_prior_to above 0 is
   * refused. ngtcp2 before 1.22.0 asserts (conn_write_handshake, `dcid.current.seq == 0`) when a server's 0.5-RTT
   * packet retires the handshake's connection ID before the client wrote its last Handshake flight (fixed by
   * bf5a8812); HANDSHAKE_DONE proves the server read that flight. */
  int awaits_confirmation;
  /* The largest retire_prior_to of any NEW_CONNECTION_ID read so far. */
  uint64_t retire_prior_to;
  /* Sequence numbers seen, as sorted disjoint half-open ranges [low, high). */
  uint64_t low[PTT_FRAME_GUARD_RANGES];
  uint64_t high[PTT_FRAME_GUARD_RANGES];
  size_t ranges;
  /* Set when a packet was refused: a PTT_FRAME_GUARD_* reason, the sequence number it tried to retire again, or the
   * TLS message type it carried. */
  int refused;
  uint64_t refused_sequence;
  uint8_t refused_tls_type;
  /* Client: the 1-RTT CRYPTO stream read so far (in order), and where it is inside the current TLS message. */
  uint64_t crypto_offset;
  uint8_t crypto_header[4];
  size_t crypto_header_length;
  uint64_t crypto_body_left;
  /* PATH_RESPONSE data of the packet read last, and whether it carried a PATH_CHALLENGE. */
  uint8_t responses[PTT_FRAME_GUARD_RESPONSES][8];
  size_t response_count;
  int read_path_challenge;
  /* Set by the caller for one read: a PATH_RESPONSE, or a NEW_CONNECTION_ID, in the packet drops it (see
   * QUICConnection+FrameGuard.swift). */
  int drop_path_responses;
  int drop_new_connection_ids;
  /* The destination connection ID (a server's own) of the 1-RTT packet that made the last path change: ngtcp2
   * has marked it used, so a packet from another path with it keeps the peer's connection ID. */
  uint8_t episode_dcid[NGTCP2_MAX_CIDLEN];
  size_t episode_dcid_length;
  /* Set when the connection sends a PATH_CHALLENGE (any size): a path validation of ngtcp2's runs (cleared by the
   * caller, which notes the time: see PathChangeRules). */
  int sent_path_challenge;
  /* PATH_CHALLENGE data sent in undersized packets (a ring: the newest ones). */
  uint8_t undersized[PTT_FRAME_GUARD_UNDERSIZED][8];
  size_t undersized_count;
  /* Packets read and packets dropped (data past a gap in the client's 1-RTT CRYPTO stream), for tests. */
  uint64_t packets_checked;
  uint64_t packets_dropped;
} ptt_frame_guard;

/* Starts a guard for a new connection: sequence number 0 counts as seen, and 1 too on a client; retirements are
 * checked. */
void ptt_frame_guard_init(ptt_frame_guard *guard, int is_client);

/* What `ptt_frame_guard_check` decided. */
enum { PTT_FRAME_GUARD_PASS = 0, PTT_FRAME_GUARD_REFUSE = -1, PTT_FRAME_GUARD_DROP = -2 };

/*
 * Reads one decrypted QUIC payload (all of its frames, parsed exactly as ngtcp2 0.12.1's `ngtcp2_pkt_decode_frame`
 * parses them: where parsing stops, ngtcp2 stops too). `short_header`: a 1-RTT packet. Returns PASS when ngtcp2 may
 * process it, REFUSE when it must not (sets `refused`), DROP when ngtcp2 should discard it unread.
 */
int ptt_frame_guard_check(ptt_frame_guard *guard, const uint8_t *payload, size_t length, int short_header);

/* Reads one 1-RTT payload the connection is about to send in a packet of `packet_size` bytes: remembers the data
 * of a PATH_CHALLENGE in it when the packet is smaller than PTT_FRAME_GUARD_FULL_PROBE. */
void ptt_frame_guard_note_sent(ptt_frame_guard *guard, const uint8_t *payload, size_t length, size_t packet_size);

/* How many connection-ID sequence numbers the peer could have made ngtcp2 hold (an upper bound). */
uint64_t ptt_frame_guard_seen_count(const ptt_frame_guard *guard);

/* 1 when a PATH_RESPONSE of the packet read last answers a challenge sent in an undersized packet. */
int ptt_frame_guard_answered_undersized(const ptt_frame_guard *guard);

/* Remembers the destination connection ID of the 1-RTT packet (`pkt`) that made a path change; `dcid_length`: the
 * length of this endpoint's own connection IDs. */
void ptt_frame_guard_note_episode_dcid(ptt_frame_guard *guard, const uint8_t *pkt, size_t pktlen,
                                       size_t dcid_length);

/* 1 when `pkt` is a 1-RTT packet whose destination connection ID is the one that made the last path change. */
int ptt_frame_guard_has_episode_dcid(const ptt_frame_guard *guard, const uint8_t *pkt, size_t pktlen);

/* Forgets the undersized challenges (a new path validation starts). */
void ptt_frame_guard_forget_challenges(ptt_frame_guard *guard);

/*
 * ngtcp2's `decrypt` callback with the guard: ngtcp2_crypto_decrypt_cb, then `ptt_frame_guard_check` on the
 * plaintext with the guard of the connection being read (see `ptt_conn_read_pkt`). A refusal is a callback failure,
 * fatal to that connection only; a drop is a decryption failure, which ngtcp2 answers by discarding the packet.
 */
int ptt_guarded_decrypt_cb(uint8_t *dest, const ngtcp2_crypto_aead *aead, const ngtcp2_crypto_aead_ctx *aead_ctx,
                           const uint8_t *ciphertext, size_t ciphertextlen, const uint8_t *nonce, size_t noncelen,
                           const uint8_t *aad, size_t aadlen);

/* ngtcp2's `encrypt` callback with the guard: `ptt_frame_guard_note_sent` on every 1-RTT plaintext of the connection
 * being written (see `ptt_conn_writev_stream`), then ngtcp2_crypto_encrypt_cb. */
int ptt_guarded_encrypt_cb(uint8_t *dest, const ngtcp2_crypto_aead *aead, const ngtcp2_crypto_aead_ctx *aead_ctx,
                           const uint8_t *plaintext, size_t plaintextlen, const uint8_t *nonce, size_t noncelen,
                           const uint8_t *aad, size_t aadlen);

/* Makes `guard` the one the guarded callbacks use on this thread (NULL: none); returns the previous one. */
ptt_frame_guard *ptt_frame_guard_swap_current(ptt_frame_guard *guard);

#endif
