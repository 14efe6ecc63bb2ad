/*
 * One ngtcp2 API over two library generations: 0.12.1 (Debian 12's main archive) and 1.x (Debian 13, and 1.11 in
 * bookworm-backports). ngtcp2 1.0 renamed or reshaped about two dozen functions, types, fields and callbacks the
 * transport uses; each one the Swift code needs is declared here once, in one shape, and ptt_ngtcp2_api.c maps it
 * onto the linked generation by NGTCP2_VERSION_NUM. The Swift code never names a function or field that differs.
 * Nothing here holds state beyond the callback pointers of the adapters at the end.
 */
#ifndef PTT_NGTCP2_API_H
#define PTT_NGTCP2_API_H

#include <stddef.h>
#include <stdint.h>
#include <ngtcp2/ngtcp2.h>

/* ---- Which generation this build links, and what the transport must work around in it ---- */

/* 1 when the build's headers are ngtcp2 1.0 or later. */
int ptt_ngtcp2_is_1x(void);
/* What the linked library (its run-time version, ngtcp2_version) needs worked around: PTT_NGTCP2_QUIRK_* bits. */
int ptt_ngtcp2_quirks(void);
enum {
  /* 0.x paces with the 333 ms initial RTT until the first RTT sample (1.x uses 1 ms). */
  PTT_NGTCP2_QUIRK_PACES_WITH_INITIAL_RTT = 1 << 0,
  /* Before 1.4.0 (354042ec), retiring a connection ID sequence number again aborts (ngtcp2_unreachable). */
  PTT_NGTCP2_QUIRK_RETIRES_TWICE = 1 << 2,
  /* Before 1.12.0 (7e89c434), a zero-length DATAGRAM vector asserts in the frame encoder. */
  PTT_NGTCP2_QUIRK_EMPTY_DATAGRAM_ASSERTS = 1 << 3,
  /* 0.x reports a retired connection ID's expiry as "retired + PTO" but removes it only after that instant, so a
   * timer that fires on time fires again and again (1.x compares with ngtcp2_tstamp_elapsed, inclusive). */
  PTT_NGTCP2_QUIRK_EXPIRY_ONE_EARLY = 1 << 4,
  /* Before 1.22.0 (bf5a8812), a client asserts when a server retires the handshake's connection ID in 0.5-RTT. */
  PTT_NGTCP2_QUIRK_EARLY_RETIREMENT_ASSERTS = 1 << 5,
};
/* The version the headers of this build name (NGTCP2_VERSION, e.g. "1.11.0"); the linked library's own version is
 * ngtcp2_version(0)->version_str. */
const char *ptt_ngtcp2_header_version(void);

/* ---- Connection close errors (ngtcp2_connection_close_error in 0.x, ngtcp2_ccerr in 1.x: same fields) ---- */
#if NGTCP2_VERSION_NUM >= 0x010000
typedef ngtcp2_ccerr ptt_ccerr;
#else
typedef ngtcp2_connection_close_error ptt_ccerr;
#endif
void ptt_ccerr_default(ptt_ccerr *ccerr);
void ptt_ccerr_set_application_error(ptt_ccerr *ccerr, uint64_t code, const uint8_t *reason, size_t reasonlen);
void ptt_ccerr_set_transport_error(ptt_ccerr *ccerr, uint64_t code, const uint8_t *reason, size_t reasonlen);
void ptt_ccerr_set_liberr(ptt_ccerr *ccerr, int liberr, const uint8_t *reason, size_t reasonlen);
void ptt_ccerr_set_tls_alert(ptt_ccerr *ccerr, uint8_t alert, const uint8_t *reason, size_t reasonlen);
/* 1 when the error is an application error (CONNECTION_CLOSE frame type 0x1d). */
int ptt_ccerr_is_application(const ptt_ccerr *ccerr);
/* The error the peer closed with (copied; `reason` points into the connection). */
void ptt_conn_get_ccerr(ngtcp2_conn *conn, ptt_ccerr *ccerr);

/* ---- Connection state ---- */
int ptt_conn_in_closing_period(ngtcp2_conn *conn);
int ptt_conn_in_draining_period(ngtcp2_conn *conn);
/* How many connection IDs of ours the connection holds (ngtcp2_conn_get_scid with no buffer). */
size_t ptt_conn_get_num_scid(ngtcp2_conn *conn);
/* Tells the connection that the server rejected 0-RTT (client; idempotent). */
int ptt_conn_early_data_rejected(ngtcp2_conn *conn);
int ptt_conn_shutdown_stream(ngtcp2_conn *conn, int64_t stream_id, uint64_t app_error_code);
int ptt_conn_shutdown_stream_read(ngtcp2_conn *conn, int64_t stream_id, uint64_t app_error_code);

/* RTT and congestion figures (ngtcp2_conn_stat in 0.x, ngtcp2_conn_info in 1.x, which has fewer). */
typedef struct ptt_conn_stats {
  uint64_t latest_rtt;
  uint64_t smoothed_rtt;
  uint64_t min_rtt; /* UINT64_MAX before the first sample */
  uint64_t cwnd;
  uint64_t bytes_in_flight;
  int rtt_sampled;    /* an RTT sample was taken */
  uint64_t pto_count; /* 0.x only; 1.x does not publish it (always 0) */
} ptt_conn_stats;
void ptt_conn_get_stats(ngtcp2_conn *conn, ptt_conn_stats *stats);

/* How long the linked library's pacer would hold the next packet after `bytes` were written since its last
 * ngtcp2_conn_update_pkt_tx_time (CUBIC), for a caller that passes `now - wait` to send again at once. Always 0 on
 * 1.x, which asserts that timestamps never go back (conn_update_timestamp): there ngtcp2 paces every burst. */
uint64_t ptt_conn_pacing_wait(ngtcp2_conn *conn, uint64_t bytes);

/* ---- Settings and transport parameters ---- */
/* Sets the token the client sends in its Initial or the one the server validated (ngtcp2 copies it). On a 1.x
 * server the token's type (Retry or NEW_TOKEN) is read from its ngtcp2_crypto magic byte. */
void ptt_settings_set_token(ngtcp2_settings *settings, const uint8_t *token, size_t tokenlen);
/* Points qlog at `write`; `odcid` names the trace (0.x; 1.x takes it from the connection). */
void ptt_settings_set_qlog(ngtcp2_settings *settings, const ngtcp2_cid *odcid, ngtcp2_qlog_write write);
/* Server: the original destination connection ID (1.x also needs it marked present). */
void ptt_transport_params_set_original_dcid(ngtcp2_transport_params *params, const ngtcp2_cid *odcid);
/* Client: the server's transport parameters as remembered for a later 0-RTT attempt. Returns the length written or
 * a negative ngtcp2 error. */
ngtcp2_ssize ptt_conn_encode_0rtt_transport_params(ngtcp2_conn *conn, uint8_t *dest, size_t destlen);
/* Client, before the first write: decodes remembered parameters and applies them, enabling 0-RTT. 0 or a negative
 * ngtcp2 error (malformed). */
int ptt_conn_set_0rtt_transport_params(ngtcp2_conn *conn, const uint8_t *data, size_t datalen);

/* ---- QUIC versions ---- */
/* QUIC v1 (RFC 9000) and v2 (RFC 9369) as they appear on the wire. */
enum { PTT_QUIC_V1 = 0x00000001, PTT_QUIC_V2 = 0x6b3343cf };
/* 1 when the build's ngtcp2 speaks QUIC v2 and compatible version negotiation (RFC 9368): 1.x. (0.12.1 knows only a
 * provisional v2 codepoint from the drafts.) */
int ptt_ngtcp2_supports_v2(void);
/* The versions a server accepts (v1 and v2 on 1.x, v1 on 0.x; `count` set), in its order of preference. */
const uint32_t *ptt_server_versions(size_t *count);
/* Server (`chosen`: the version the client's Initial is in): accepts every version of ptt_server_versions; with
 * `negotiate` it prefers v2 (a client that offers v2 in its version_information moves there by compatible negotiation,
 * RFC 9368), otherwise it keeps the client in the version it chose. Client: starts in `chosen`; with `negotiate` it
 * offers v1 and v2 (v2 first), otherwise only `chosen`. Nothing on 0.x. */
void ptt_settings_set_versions(ngtcp2_settings *settings, int is_server, uint32_t chosen, int negotiate);

/* ---- Packet headers ---- */
/* The token of a client Initial ngtcp2_accept decoded (NULL when none). */
const uint8_t *ptt_pkt_hd_token(const ngtcp2_pkt_hd *hd, size_t *tokenlen);

/* ---- Flags ---- */
enum {
#if NGTCP2_VERSION_NUM >= 0x010000
  PTT_STREAM_DATA_FLAG_EARLY = NGTCP2_STREAM_DATA_FLAG_0RTT,
  PTT_DATAGRAM_FLAG_EARLY = NGTCP2_DATAGRAM_FLAG_0RTT,
#else
  PTT_STREAM_DATA_FLAG_EARLY = NGTCP2_STREAM_DATA_FLAG_EARLY,
  PTT_DATAGRAM_FLAG_EARLY = NGTCP2_DATAGRAM_FLAG_EARLY,
#endif
};

/* ---- Callbacks whose signature or name changed: one shape, adapted in C ---- */
/* Path validation ended; `succeeded` is 1 on success. (1.x adds the fallback path, which the transport ignores.) */
typedef int (*ptt_path_validation_cb)(ngtcp2_conn *conn, uint32_t flags, const ngtcp2_path *path, int succeeded,
                                      void *user_data);
/* A NEW_TOKEN frame arrived (0.x passes an ngtcp2_vec, 1.x a pointer and a length). */
typedef int (*ptt_recv_new_token_cb)(ngtcp2_conn *conn, const uint8_t *token, size_t tokenlen, void *user_data);
/* The server rejected 0-RTT (early_data_rejected in 0.x, tls_early_data_rejected in 1.x). */
typedef int (*ptt_early_data_rejected_cb)(ngtcp2_conn *conn, void *user_data);
/* Install the callbacks above; every connection of a process must pass the same function. */
void ptt_callbacks_set_path_validation(ngtcp2_callbacks *callbacks, ptt_path_validation_cb callback);
void ptt_callbacks_set_recv_new_token(ngtcp2_callbacks *callbacks, ptt_recv_new_token_cb callback);
void ptt_callbacks_set_early_data_rejected(ngtcp2_callbacks *callbacks, ptt_early_data_rejected_cb callback);

#endif
