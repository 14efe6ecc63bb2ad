/*
 * The NEW_CONNECTION_ID guard: keeps a peer from aborting the process through ngtcp2 0.12.1's double retirement
 * of a connection ID. It reads every decrypted packet before ngtcp2 does and refuses (closing only that
 * connection, PROTOCOL_VIOLATION) a packet whose NEW_CONNECTION_ID would make ngtcp2 retire a sequence number a
 * second time. It never changes a packet and never keeps a pointer into one.
 *
 * Why this guard is complete. In 0.12.1, `ngtcp2_conn_track_retired_dcid_seq` aborts (`ngtcp2_unreachable`, an
 * unconditional abort) when asked to retire a sequence number whose earlier retirement the peer has not yet
 * acknowledged. Every retirement goes through it, by one of two routes:
 *   (a) a NEW_CONNECTION_ID whose sequence number is below the largest retire_prior_to received so far (R):
 *       ngtcp2 retires that number at once without checking whether it already did;
 *   (b) connection IDs ngtcp2 holds (the handshake's, sequence 0; the preferred address's, sequence 1; and each
 *       one a NEW_CONNECTION_ID added), retired when R passes them, on migration, or when stale. ngtcp2 admits
 *       a sequence number into what it holds at most once (its `seqgap` remembers every number it has seen), and
 *       drops an ID from what it holds when it retires it, so route (b) never retires a number twice.
 * So a number can be retired twice only if route (a) names a number that was retired before, and every number
 * ever retired is one the guard has seen: 0 from the start (and 1 on a client, whose server may name sequence 1
 * in its preferred_address), every other one in a NEW_CONNECTION_ID. The
 * guard therefore refuses a NEW_CONNECTION_ID below R whose sequence number it has seen before, and lets one it
 * has never seen through (a frame delayed by reordering: ngtcp2 retires it once, correctly). Its memory of seen
 * numbers is a bounded set of ranges that only ever grows when full (a merged gap counts as seen), so it may
 * refuse more, never less.
 */
#ifndef PTT_NCID_GUARD_H
#define PTT_NCID_GUARD_H

#include <stddef.h>
#include <stdint.h>
#include <ngtcp2/ngtcp2.h>

/* How many disjoint ranges of seen sequence numbers a guard keeps before it merges the lowest gap. */
#define PTT_NCID_GUARD_RANGES 16

typedef struct ptt_ncid_guard {
  /* The largest retire_prior_to of any NEW_CONNECTION_ID read so far. */
  uint64_t retire_prior_to;
  /* Sequence numbers seen, as sorted disjoint half-open ranges [low, high). */
  uint64_t low[PTT_NCID_GUARD_RANGES];
  uint64_t high[PTT_NCID_GUARD_RANGES];
  size_t ranges;
  /* Set when a packet was refused: the sequence number it tried to retire again. */
  int refused;
  uint64_t refused_sequence;
  /* Packets read, for tests and statistics. */
  uint64_t packets_checked;
} ptt_ncid_guard;

/* Starts a guard for a new connection: sequence number 0 counts as seen, and 1 too on a client. */
void ptt_ncid_guard_init(ptt_ncid_guard *guard, int is_client);

/*
 * Reads one decrypted QUIC payload (all of its frames, parsed exactly as ngtcp2 0.12.1's
 * `ngtcp2_pkt_decode_frame` parses them, where parsing stops, ngtcp2 stops too). Returns 0 when ngtcp2 may
 * process it; -1 when it holds a NEW_CONNECTION_ID that would retire an already-retired sequence number (sets
 * `refused`). Updates the guard's state either way.
 */
int ptt_ncid_guard_check(ptt_ncid_guard *guard, const uint8_t *payload, size_t length);

/*
 * ngtcp2's `decrypt` callback with the guard: ngtcp2_crypto_decrypt_cb, then `ptt_ncid_guard_check` on the
 * plaintext with the guard of the connection being read (see `ptt_conn_read_pkt`). A refusal is a callback
 * failure, which is fatal to that connection only.
 */
int ptt_guarded_decrypt_cb(uint8_t *dest, const ngtcp2_crypto_aead *aead, const ngtcp2_crypto_aead_ctx *aead_ctx,
                           const uint8_t *ciphertext, size_t ciphertextlen, const uint8_t *nonce, size_t noncelen,
                           const uint8_t *aad, size_t aadlen);

/* Makes `guard` the one `ptt_guarded_decrypt_cb` uses on this thread (NULL: none); returns the previous one. */
ptt_ncid_guard *ptt_ncid_guard_swap_current(ptt_ncid_guard *guard);

#endif
