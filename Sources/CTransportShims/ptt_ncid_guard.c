/* The NEW_CONNECTION_ID guard (see ptt_ncid_guard.h for what it guards against and why it is complete). */
#include "ptt_ncid_guard.h"

#include <string.h>
#include <ngtcp2/ngtcp2_crypto.h>

/* The guard of the connection whose ngtcp2_conn_read_pkt runs on this thread (the callback has no user data). */
static _Thread_local ptt_ncid_guard *current_guard;

ptt_ncid_guard *ptt_ncid_guard_swap_current(ptt_ncid_guard *guard) {
  ptt_ncid_guard *previous = current_guard;
  current_guard = guard;
  return previous;
}

/* ---- the set of seen sequence numbers ---- */

static int guard_has_seen(const ptt_ncid_guard *guard, uint64_t seq) {
  for (size_t i = 0; i < guard->ranges; ++i) {
    if (seq >= guard->low[i] && seq < guard->high[i]) return 1;
  }
  return 0;
}

/* Adds seq; when the ranges are full, merges the two lowest (the gap between them then counts as seen). */
static void guard_remember(ptt_ncid_guard *guard, uint64_t seq) {
  if (guard_has_seen(guard, seq) || seq == UINT64_MAX) return;
  size_t at = 0;
  while (at < guard->ranges && guard->low[at] < seq) ++at;
  int joins_left = at > 0 && guard->high[at - 1] == seq;
  int joins_right = at < guard->ranges && guard->low[at] == seq + 1;
  if (joins_left && joins_right) {
    guard->high[at - 1] = guard->high[at];
    memmove(&guard->low[at], &guard->low[at + 1], (guard->ranges - at - 1) * sizeof(uint64_t));
    memmove(&guard->high[at], &guard->high[at + 1], (guard->ranges - at - 1) * sizeof(uint64_t));
    --guard->ranges;
    return;
  }
  if (joins_left) {
    guard->high[at - 1] = seq + 1;
    return;
  }
  if (joins_right) {
    guard->low[at] = seq;
    return;
  }
  if (guard->ranges == PTT_NCID_GUARD_RANGES) {
    guard->high[0] = guard->high[1];  /* merge the lowest gap: over-approximate, never forget */
    memmove(&guard->low[1], &guard->low[2], (guard->ranges - 2) * sizeof(uint64_t));
    memmove(&guard->high[1], &guard->high[2], (guard->ranges - 2) * sizeof(uint64_t));
    --guard->ranges;
    guard_remember(guard, seq);
    return;
  }
  memmove(&guard->low[at + 1], &guard->low[at], (guard->ranges - at) * sizeof(uint64_t));
  memmove(&guard->high[at + 1], &guard->high[at], (guard->ranges - at) * sizeof(uint64_t));
  guard->low[at] = seq;
  guard->high[at] = seq + 1;
  ++guard->ranges;
}

void ptt_ncid_guard_init(ptt_ncid_guard *guard, int is_client) {
  memset(guard, 0, sizeof(*guard));
  guard->low[0] = 0;
  guard->high[0] = is_client ? 2 : 1;
  guard->ranges = 1;
}

/* ---- a frame walker with 0.12.1's exact lengths ---- */

/* QUIC v1 frame types (RFC 9000 §19, RFC 9221), as 0.12.1 dispatches on them (a one-byte type). */
enum {
  FRAME_PADDING = 0x00,
  FRAME_PING = 0x01,
  FRAME_ACK = 0x02,
  FRAME_ACK_ECN = 0x03,
  FRAME_RESET_STREAM = 0x04,
  FRAME_STOP_SENDING = 0x05,
  FRAME_CRYPTO = 0x06,
  FRAME_NEW_TOKEN = 0x07,
  FRAME_STREAM = 0x08,
  FRAME_MAX_DATA = 0x10,
  FRAME_MAX_STREAM_DATA = 0x11,
  FRAME_MAX_STREAMS_BIDI = 0x12,
  FRAME_MAX_STREAMS_UNI = 0x13,
  FRAME_DATA_BLOCKED = 0x14,
  FRAME_STREAM_DATA_BLOCKED = 0x15,
  FRAME_STREAMS_BLOCKED_BIDI = 0x16,
  FRAME_STREAMS_BLOCKED_UNI = 0x17,
  FRAME_NEW_CONNECTION_ID = 0x18,
  FRAME_RETIRE_CONNECTION_ID = 0x19,
  FRAME_PATH_CHALLENGE = 0x1a,
  FRAME_PATH_RESPONSE = 0x1b,
  FRAME_CONNECTION_CLOSE = 0x1c,
  FRAME_CONNECTION_CLOSE_APP = 0x1d,
  FRAME_HANDSHAKE_DONE = 0x1e,
  FRAME_DATAGRAM = 0x30,
  FRAME_DATAGRAM_LEN = 0x31,
};
/* STREAM frame type bits. */
enum { STREAM_LEN_BIT = 0x02, STREAM_OFF_BIT = 0x04 };

/* A cursor over the payload; every read checks the bytes are there, as ngtcp2's decoders do. */
typedef struct {
  const uint8_t *p;
  const uint8_t *end;
} cursor;

static int take_varint(cursor *c, uint64_t *value) {
  if (c->p == c->end) return -1;
  size_t n = (size_t)1 << (*c->p >> 6);
  if ((size_t)(c->end - c->p) < n) return -1;
  uint64_t v = *c->p & 0x3f;
  for (size_t i = 1; i < n; ++i) v = (v << 8) | c->p[i];
  c->p += n;
  if (value) *value = v;
  return 0;
}

static int take_varints(cursor *c, int count) {
  for (int i = 0; i < count; ++i) {
    if (take_varint(c, NULL) != 0) return -1;
  }
  return 0;
}

static int take_bytes(cursor *c, uint64_t count) {
  if ((uint64_t)(c->end - c->p) < count) return -1;
  c->p += count;
  return 0;
}

/* A varint length, then that many bytes. */
static int take_length_prefixed(cursor *c) {
  uint64_t length;
  return take_varint(c, &length) == 0 ? take_bytes(c, length) : -1;
}

static int take_ack(cursor *c, uint8_t type) {
  uint64_t ranges;
  if (take_varints(c, 2) != 0 || take_varint(c, &ranges) != 0) return -1;
  /* ngtcp2 first requires two bytes per range to remain (a cheap bound before it walks them). */
  if (ranges > SIZE_MAX / 2 || (uint64_t)(c->end - c->p) < ranges * 2) return -1;
  if (take_varint(c, NULL) != 0) return -1;
  for (uint64_t i = 0; i < ranges; ++i) {
    if (take_varints(c, 2) != 0) return -1;
  }
  return type == FRAME_ACK_ECN ? take_varints(c, 3) : 0;
}

static int take_stream(cursor *c, uint8_t type) {
  if (take_varint(c, NULL) != 0) return -1;                                  /* stream ID */
  if ((type & STREAM_OFF_BIT) && take_varint(c, NULL) != 0) return -1; /* offset */
  if (type & STREAM_LEN_BIT) return take_length_prefixed(c);
  c->p = c->end; /* no length: the data runs to the end of the packet */
  return 0;
}

/* A NEW_CONNECTION_ID: checks it against the guard, then remembers it. 1: refuse the packet. */
static int take_new_connection_id(cursor *c, ptt_ncid_guard *guard) {
  uint64_t seq, retire_prior_to;
  if (take_varint(c, &seq) != 0 || take_varint(c, &retire_prior_to) != 0) return -1;
  if (c->p == c->end) return -1;
  uint8_t cid_length = *c->p++;
  if (cid_length < NGTCP2_MIN_CIDLEN || cid_length > NGTCP2_MAX_CIDLEN) return -1;
  if (take_bytes(c, (uint64_t)cid_length + NGTCP2_STATELESS_RESET_TOKENLEN) != 0) return -1;
  if (retire_prior_to > seq) return -1; /* ngtcp2 closes with FRAME_ENCODING_ERROR before using it */
  if (seq < guard->retire_prior_to && guard_has_seen(guard, seq)) {
    guard->refused = 1;
    guard->refused_sequence = seq;
    return 1;
  }
  guard_remember(guard, seq);
  if (retire_prior_to > guard->retire_prior_to) guard->retire_prior_to = retire_prior_to;
  return 0;
}

/* One frame, as ngtcp2_pkt_decode_frame reads it. 0: next frame; -1: ngtcp2 stops here too; 1: refuse. */
static int take_frame(cursor *c, ptt_ncid_guard *guard) {
  uint8_t type = *c->p++;
  switch (type) {
  case FRAME_PADDING:
    while (c->p != c->end && *c->p == FRAME_PADDING) ++c->p;
    return 0;
  case FRAME_PING:
  case FRAME_HANDSHAKE_DONE:
    return 0;
  case FRAME_ACK:
  case FRAME_ACK_ECN:
    return take_ack(c, type);
  case FRAME_RESET_STREAM:
    return take_varints(c, 3);
  case FRAME_STOP_SENDING:
  case FRAME_MAX_STREAM_DATA:
  case FRAME_STREAM_DATA_BLOCKED:
    return take_varints(c, 2);
  case FRAME_MAX_DATA:
  case FRAME_MAX_STREAMS_BIDI:
  case FRAME_MAX_STREAMS_UNI:
  case FRAME_DATA_BLOCKED:
  case FRAME_STREAMS_BLOCKED_BIDI:
  case FRAME_STREAMS_BLOCKED_UNI:
  case FRAME_RETIRE_CONNECTION_ID:
    return take_varints(c, 1);
  case FRAME_CRYPTO:
    return take_varint(c, NULL) == 0 ? take_length_prefixed(c) : -1;
  case FRAME_NEW_TOKEN:
    return take_length_prefixed(c);
  case FRAME_NEW_CONNECTION_ID:
    return take_new_connection_id(c, guard);
  case FRAME_PATH_CHALLENGE:
  case FRAME_PATH_RESPONSE:
    return take_bytes(c, 8);
  case FRAME_CONNECTION_CLOSE:
    return take_varints(c, 2) == 0 ? take_length_prefixed(c) : -1;
  case FRAME_CONNECTION_CLOSE_APP:
    return take_varint(c, NULL) == 0 ? take_length_prefixed(c) : -1;
  case FRAME_DATAGRAM:
    c->p = c->end;
    return 0;
  case FRAME_DATAGRAM_LEN:
    return take_length_prefixed(c);
  default:
    /* 0.12.1 reads every other type with the STREAM bit (0x08) as a STREAM frame, and stops at the rest. */
    if ((type & FRAME_STREAM) == FRAME_STREAM) return take_stream(c, type);
    return -1;
  }
}

int ptt_ncid_guard_check(ptt_ncid_guard *guard, const uint8_t *payload, size_t length) {
  cursor c = {payload, payload + length};
  ++guard->packets_checked;
  while (c.p != c.end) {
    int rv = take_frame(&c, guard);
    if (rv == 1) return -1;
    if (rv < 0) return 0; /* ngtcp2 rejects the packet at this frame: nothing after it is processed */
  }
  return 0;
}

int ptt_guarded_decrypt_cb(uint8_t *dest, const ngtcp2_crypto_aead *aead, const ngtcp2_crypto_aead_ctx *aead_ctx,
                           const uint8_t *ciphertext, size_t ciphertextlen, const uint8_t *nonce, size_t noncelen,
                           const uint8_t *aad, size_t aadlen) {
  int rv = ngtcp2_crypto_decrypt_cb(dest, aead, aead_ctx, ciphertext, ciphertextlen, nonce, noncelen, aad, aadlen);
  if (rv != 0 || current_guard == NULL || ciphertextlen < aead->max_overhead) return rv;
  return ptt_ncid_guard_check(current_guard, dest, ciphertextlen - aead->max_overhead) == 0
             ? 0
             : NGTCP2_ERR_CALLBACK_FAILURE;
}
