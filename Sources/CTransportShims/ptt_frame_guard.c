/* The frame guard (see ptt_frame_guard.h for what it guards against and why that is complete). */
#include "ptt_frame_guard.h"

#include <string.h>
#include <ngtcp2/ngtcp2_crypto.h>

/* The guard of the connection that ngtcp2 reads or writes on this thread (the callbacks have no user data). */
static _Thread_local ptt_frame_guard *current_guard;

ptt_frame_guard *ptt_frame_guard_swap_current(ptt_frame_guard *guard) {
  ptt_frame_guard *previous = current_guard;
  current_guard = guard;
  return previous;
}

/* ---- the set of seen sequence numbers ---- */

static int guard_has_seen(const ptt_frame_guard *guard, uint64_t seq) {
  for (size_t i = 0; i < guard->ranges; ++i) {
    if (seq >= guard->low[i] && seq < guard->high[i]) return 1;
  }
  return 0;
}

/* Adds seq; when the ranges are full, merges the two lowest (the gap between them then counts as seen). */
static void guard_remember(ptt_frame_guard *guard, uint64_t seq) {
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
  if (guard->ranges == PTT_FRAME_GUARD_RANGES) {
    guard->high[0] = guard->high[1]; /* merge the lowest gap: over-approximate, never forget */
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

uint64_t ptt_frame_guard_seen_count(const ptt_frame_guard *guard) {
  uint64_t count = 0;
  for (size_t i = 0; i < guard->ranges; ++i) {
    uint64_t width = guard->high[i] - guard->low[i];
    count = count > UINT64_MAX - width ? UINT64_MAX : count + width;
  }
  return count;
}

void ptt_frame_guard_init(ptt_frame_guard *guard, int is_client) {
  memset(guard, 0, sizeof(*guard));
  guard->is_client = is_client;
  guard->checks_retirements = 1;
  guard->low[0] = 0;
  guard->high[0] = is_client ? 2 : 1;
  guard->ranges = 1;
}

/* ---- path validation records ---- */

int ptt_frame_guard_answered_undersized(const ptt_frame_guard *guard) {
  size_t kept = guard->undersized_count < PTT_FRAME_GUARD_UNDERSIZED ? guard->undersized_count
                                                                      : PTT_FRAME_GUARD_UNDERSIZED;
  for (size_t r = 0; r < guard->response_count; ++r) {
    for (size_t u = 0; u < kept; ++u) {
      if (memcmp(guard->responses[r], guard->undersized[u], 8) == 0) return 1;
    }
  }
  return 0;
}

void ptt_frame_guard_forget_challenges(ptt_frame_guard *guard) { guard->undersized_count = 0; }

void ptt_frame_guard_note_episode_dcid(ptt_frame_guard *guard, const uint8_t *pkt, size_t pktlen,
                                       size_t dcid_length) {
  if (pktlen < 1 + dcid_length || (pkt[0] & 0x80) || dcid_length > NGTCP2_MAX_CIDLEN) return;
  memcpy(guard->episode_dcid, pkt + 1, dcid_length);
  guard->episode_dcid_length = dcid_length;
}

int ptt_frame_guard_has_episode_dcid(const ptt_frame_guard *guard, const uint8_t *pkt, size_t pktlen) {
  size_t length = guard->episode_dcid_length;
  return length > 0 && pktlen >= 1 + length && (pkt[0] & 0x80) == 0 &&
         memcmp(pkt + 1, guard->episode_dcid, length) == 0;
}

static void remember_response(ptt_frame_guard *guard, const uint8_t *data) {
  if (guard->response_count < PTT_FRAME_GUARD_RESPONSES) memcpy(guard->responses[guard->response_count++], data, 8);
}

static void remember_undersized_challenge(ptt_frame_guard *guard, const uint8_t *data) {
  memcpy(guard->undersized[guard->undersized_count % PTT_FRAME_GUARD_UNDERSIZED], data, 8);
  ++guard->undersized_count;
}

/* ---- a client's 1-RTT CRYPTO stream: NewSessionTicket messages only ---- */

enum { TLS_NEW_SESSION_TICKET = 4 };

/* Reads [offset, offset + length) of the stream. 0: fine; 1: refuse (another message type); 2: drop (a gap). */
static int read_client_crypto(ptt_frame_guard *guard, uint64_t offset, const uint8_t *data, uint64_t length) {
  if (offset > guard->crypto_offset) return 2;
  uint64_t skip = guard->crypto_offset - offset;
  if (skip >= length) return 0; /* all of it read before (a retransmission) */
  data += skip;
  length -= skip;
  for (uint64_t i = 0; i < length;) {
    if (guard->crypto_header_length < 4) {
      uint8_t byte = data[i++];
      guard->crypto_header[guard->crypto_header_length++] = byte;
      if (guard->crypto_header_length == 1 && byte != TLS_NEW_SESSION_TICKET) {
        guard->refused_tls_type = byte;
        return 1;
      }
      if (guard->crypto_header_length == 4) {
        guard->crypto_body_left = ((uint64_t)guard->crypto_header[1] << 16) |
                                  ((uint64_t)guard->crypto_header[2] << 8) | guard->crypto_header[3];
        if (guard->crypto_body_left == 0) guard->crypto_header_length = 0;
      }
      continue;
    }
    uint64_t body = length - i < guard->crypto_body_left ? length - i : guard->crypto_body_left;
    i += body;
    guard->crypto_body_left -= body;
    if (guard->crypto_body_left == 0) guard->crypto_header_length = 0;
  }
  guard->crypto_offset += length;
  return 0;
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

/* What take_frame tells its caller. */
enum { NEXT_FRAME = 0, STOP = -1, REFUSE = 1, DROP = 2 };

/* A cursor over a payload; every read checks the bytes are there, as ngtcp2's decoders do. `reading`: a packet from
 * the peer (judged and remembered); otherwise one this endpoint sends (only its PATH_CHALLENGEs are noted). */
typedef struct {
  const uint8_t *p;
  const uint8_t *end;
  ptt_frame_guard *guard;
  int reading;
  int short_header;
  int undersized;
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
  if (take_varint(c, NULL) != 0) return -1;                            /* stream ID */
  if ((type & STREAM_OFF_BIT) && take_varint(c, NULL) != 0) return -1; /* offset */
  if (type & STREAM_LEN_BIT) return take_length_prefixed(c);
  c->p = c->end; /* no length: the data runs to the end of the packet */
  return 0;
}

/* A NEW_CONNECTION_ID read from the peer: checks it against the guard, then remembers it. */
static int take_new_connection_id(cursor *c) {
  uint64_t seq, retire_prior_to;
  if (take_varint(c, &seq) != 0 || take_varint(c, &retire_prior_to) != 0) return STOP;
  if (c->p == c->end) return STOP;
  uint8_t cid_length = *c->p++;
  if (cid_length < NGTCP2_MIN_CIDLEN || cid_length > NGTCP2_MAX_CIDLEN) return STOP;
  if (take_bytes(c, (uint64_t)cid_length + NGTCP2_STATELESS_RESET_TOKENLEN) != 0) return STOP;
  if (!c->reading) return NEXT_FRAME;
  if (retire_prior_to > seq) return STOP; /* ngtcp2 closes with FRAME_ENCODING_ERROR before using it */
  ptt_frame_guard *guard = c->guard;
  /* While a path change settles, only a retire_prior_to could make ngtcp2 retire the IDs its validations hold: with
   * none ever above 0, a NEW_CONNECTION_ID only adds a spare ID (ngtcp2 clients send one after each retirement). */
  if (guard->drop_new_connection_ids && (retire_prior_to > 0 || guard->retire_prior_to > 0)) return DROP;
  if (guard->is_client && guard->awaits_confirmation && retire_prior_to > 0) {
    guard->refused = PTT_FRAME_GUARD_RETIRES_EARLY;
    guard->refused_sequence = retire_prior_to;
    return REFUSE;
  }
  if (guard->checks_retirements && seq < guard->retire_prior_to && guard_has_seen(guard, seq)) {
    guard->refused = PTT_FRAME_GUARD_RETIRES_AGAIN;
    guard->refused_sequence = seq;
    return REFUSE;
  }
  guard_remember(guard, seq);
  if (retire_prior_to > guard->retire_prior_to) guard->retire_prior_to = retire_prior_to;
  return NEXT_FRAME;
}

/* A CRYPTO frame: in a 1-RTT packet from the peer, only what the role allows there (see the header). */
static int take_crypto(cursor *c) {
  uint64_t offset, length;
  if (take_varint(c, &offset) != 0 || take_varint(c, &length) != 0) return STOP;
  const uint8_t *data = c->p;
  if (take_bytes(c, length) != 0) return STOP;
  if (!c->reading || !c->short_header) return NEXT_FRAME;
  ptt_frame_guard *guard = c->guard;
  int verdict = 1;
  if (guard->is_client) {
    verdict = read_client_crypto(guard, offset, data, length);
  } else {
    guard->refused_tls_type = length > 0 ? data[0] : 0;
  }
  if (verdict == 1) {
    guard->refused = PTT_FRAME_GUARD_TLS_IN_1RTT;
    return REFUSE;
  }
  return verdict == 2 ? DROP : NEXT_FRAME;
}

static int take_path_frame(cursor *c, uint8_t type) {
  const uint8_t *data = c->p;
  if (take_bytes(c, 8) != 0) return STOP;
  if (c->reading && type == FRAME_PATH_RESPONSE) {
    if (c->guard->drop_path_responses) return DROP;
    remember_response(c->guard, data);
  }
  if (c->reading && type == FRAME_PATH_CHALLENGE) c->guard->read_path_challenge = 1;
  if (!c->reading && type == FRAME_PATH_CHALLENGE) {
    c->guard->sent_path_challenge = 1;
    if (c->undersized) remember_undersized_challenge(c->guard, data);
  }
  return NEXT_FRAME;
}

/* One frame, as ngtcp2_pkt_decode_frame reads it. */
static int take_frame(cursor *c) {
  uint8_t type = *c->p++;
  switch (type) {
  case FRAME_PADDING:
    while (c->p != c->end && *c->p == FRAME_PADDING) ++c->p;
    return NEXT_FRAME;
  case FRAME_PING:
  case FRAME_HANDSHAKE_DONE:
    return NEXT_FRAME;
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
    return take_crypto(c);
  case FRAME_NEW_TOKEN:
    return take_length_prefixed(c);
  case FRAME_NEW_CONNECTION_ID:
    return take_new_connection_id(c);
  case FRAME_PATH_CHALLENGE:
  case FRAME_PATH_RESPONSE:
    return take_path_frame(c, type);
  case FRAME_CONNECTION_CLOSE:
    return take_varints(c, 2) == 0 ? take_length_prefixed(c) : STOP;
  case FRAME_CONNECTION_CLOSE_APP:
    return take_varint(c, NULL) == 0 ? take_length_prefixed(c) : STOP;
  case FRAME_DATAGRAM:
    c->p = c->end;
    return NEXT_FRAME;
  case FRAME_DATAGRAM_LEN:
    return take_length_prefixed(c);
  default:
    /* 0.12.1 reads every other type with the STREAM bit (0x08) as a STREAM frame, and stops at the rest. */
    if ((type & FRAME_STREAM) == FRAME_STREAM) return take_stream(c, type);
    return STOP;
  }
}

/* Walks every frame; returns the first verdict that is not NEXT_FRAME (STOP: ngtcp2 rejects the packet there, so
 * nothing after it is processed), or NEXT_FRAME at the end. */
static int walk(cursor *c) {
  while (c->p != c->end) {
    int verdict = take_frame(c);
    if (verdict != NEXT_FRAME) return verdict;
  }
  return NEXT_FRAME;
}

int ptt_frame_guard_check(ptt_frame_guard *guard, const uint8_t *payload, size_t length, int short_header) {
  /* A dropped packet is read again when the peer resends it: its CRYPTO bytes must be judged again then. */
  uint64_t crypto_offset = guard->crypto_offset, crypto_body_left = guard->crypto_body_left;
  size_t crypto_header_length = guard->crypto_header_length;
  uint8_t crypto_header[4];
  memcpy(crypto_header, guard->crypto_header, sizeof(crypto_header));
  cursor c = {payload, payload + length, guard, 1, short_header, 0};
  ++guard->packets_checked;
  guard->response_count = 0;
  guard->read_path_challenge = 0;
  switch (walk(&c)) {
  case REFUSE:
    return PTT_FRAME_GUARD_REFUSE;
  case DROP:
    guard->crypto_offset = crypto_offset;
    guard->crypto_body_left = crypto_body_left;
    guard->crypto_header_length = crypto_header_length;
    memcpy(guard->crypto_header, crypto_header, sizeof(crypto_header));
    guard->response_count = 0;
    ++guard->packets_dropped;
    return PTT_FRAME_GUARD_DROP;
  default:
    return PTT_FRAME_GUARD_PASS;
  }
}

void ptt_frame_guard_note_sent(ptt_frame_guard *guard, const uint8_t *payload, size_t length, size_t packet_size) {
  cursor c = {payload, payload + length, guard, 0, 1, packet_size < PTT_FRAME_GUARD_FULL_PROBE};
  if (c.undersized) walk(&c);
}

/* A short (1-RTT) header has the top bit of its first byte clear. */
static int is_short_header(const uint8_t *aad, size_t aadlen) { return aadlen > 0 && (aad[0] & 0x80) == 0; }

int ptt_guarded_decrypt_cb(uint8_t *dest, const ngtcp2_crypto_aead *aead, const ngtcp2_crypto_aead_ctx *aead_ctx,
                           const uint8_t *ciphertext, size_t ciphertextlen, const uint8_t *nonce, size_t noncelen,
                           const uint8_t *aad, size_t aadlen) {
  int rv = ngtcp2_crypto_decrypt_cb(dest, aead, aead_ctx, ciphertext, ciphertextlen, nonce, noncelen, aad, aadlen);
  if (rv != 0 || current_guard == NULL || ciphertextlen < aead->max_overhead) return rv;
  switch (ptt_frame_guard_check(current_guard, dest, ciphertextlen - aead->max_overhead,
                                is_short_header(aad, aadlen))) {
  case PTT_FRAME_GUARD_REFUSE:
    return NGTCP2_ERR_CALLBACK_FAILURE;
  case PTT_FRAME_GUARD_DROP:
    return NGTCP2_ERR_DECRYPT;
  default:
    return 0;
  }
}

int ptt_guarded_encrypt_cb(uint8_t *dest, const ngtcp2_crypto_aead *aead, const ngtcp2_crypto_aead_ctx *aead_ctx,
                           const uint8_t *plaintext, size_t plaintextlen, const uint8_t *nonce, size_t noncelen,
                           const uint8_t *aad, size_t aadlen) {
  if (current_guard != NULL && is_short_header(aad, aadlen)) {
    ptt_frame_guard_note_sent(current_guard, plaintext, plaintextlen, aadlen + plaintextlen + aead->max_overhead);
  }
  return ngtcp2_crypto_encrypt_cb(dest, aead, aead_ctx, plaintext, plaintextlen, nonce, noncelen, aad, aadlen);
}
