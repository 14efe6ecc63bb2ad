#include "ptt_ngtcp2_api.h"

#include <stdatomic.h>
#include <string.h>
#include <ngtcp2/ngtcp2_crypto.h>

#define PTT_NGTCP2_1X (NGTCP2_VERSION_NUM >= 0x010000)

int ptt_ngtcp2_is_1x(void) { return PTT_NGTCP2_1X; }

const char *ptt_ngtcp2_header_version(void) { return NGTCP2_VERSION; }

int ptt_ngtcp2_quirks(void) {
  uint32_t version = (uint32_t)ngtcp2_version(0)->version_num;
  int quirks = 0;
  if (version < 0x010000) {
    quirks |= PTT_NGTCP2_QUIRK_PACES_WITH_INITIAL_RTT | PTT_NGTCP2_QUIRK_EXPIRY_ONE_EARLY;
  }
  if (version < 0x010400) quirks |= PTT_NGTCP2_QUIRK_RETIRES_TWICE;
  if (version < 0x010c00) quirks |= PTT_NGTCP2_QUIRK_EMPTY_DATAGRAM_ASSERTS;
  if (version < 0x011600) quirks |= PTT_NGTCP2_QUIRK_EARLY_RETIREMENT_ASSERTS;
  return quirks;
}

/* ---- Connection close errors ---- */

/* The same five functions under their 1.x and 0.x names. */
#if PTT_NGTCP2_1X
#define CCERR_DEFAULT ngtcp2_ccerr_default
#define CCERR_SET_APPLICATION_ERROR ngtcp2_ccerr_set_application_error
#define CCERR_SET_TRANSPORT_ERROR ngtcp2_ccerr_set_transport_error
#define CCERR_SET_LIBERR ngtcp2_ccerr_set_liberr
#define CCERR_SET_TLS_ALERT ngtcp2_ccerr_set_tls_alert
#define CCERR_TYPE_APPLICATION NGTCP2_CCERR_TYPE_APPLICATION
#else
#define CCERR_DEFAULT ngtcp2_connection_close_error_default
#define CCERR_SET_APPLICATION_ERROR ngtcp2_connection_close_error_set_application_error
#define CCERR_SET_TRANSPORT_ERROR ngtcp2_connection_close_error_set_transport_error
#define CCERR_SET_LIBERR ngtcp2_connection_close_error_set_transport_error_liberr
#define CCERR_SET_TLS_ALERT ngtcp2_connection_close_error_set_transport_error_tls_alert
#define CCERR_TYPE_APPLICATION NGTCP2_CONNECTION_CLOSE_ERROR_CODE_TYPE_APPLICATION
#endif

void ptt_ccerr_default(ptt_ccerr *ccerr) { CCERR_DEFAULT(ccerr); }
void ptt_ccerr_set_application_error(ptt_ccerr *ccerr, uint64_t code, const uint8_t *reason, size_t reasonlen) {
  CCERR_SET_APPLICATION_ERROR(ccerr, code, reason, reasonlen);
}
void ptt_ccerr_set_transport_error(ptt_ccerr *ccerr, uint64_t code, const uint8_t *reason, size_t reasonlen) {
  CCERR_SET_TRANSPORT_ERROR(ccerr, code, reason, reasonlen);
}
void ptt_ccerr_set_liberr(ptt_ccerr *ccerr, int liberr, const uint8_t *reason, size_t reasonlen) {
  CCERR_SET_LIBERR(ccerr, liberr, reason, reasonlen);
}
void ptt_ccerr_set_tls_alert(ptt_ccerr *ccerr, uint8_t alert, const uint8_t *reason, size_t reasonlen) {
  CCERR_SET_TLS_ALERT(ccerr, alert, reason, reasonlen);
}
int ptt_ccerr_is_application(const ptt_ccerr *ccerr) { return ccerr->type == CCERR_TYPE_APPLICATION; }

void ptt_conn_get_ccerr(ngtcp2_conn *conn, ptt_ccerr *ccerr) {
#if PTT_NGTCP2_1X
  *ccerr = *ngtcp2_conn_get_ccerr(conn);
#else
  ngtcp2_conn_get_connection_close_error(conn, ccerr);
#endif
}

/* ---- Connection state ---- */

#if PTT_NGTCP2_1X
int ptt_conn_in_closing_period(ngtcp2_conn *conn) { return ngtcp2_conn_in_closing_period(conn); }
int ptt_conn_in_draining_period(ngtcp2_conn *conn) { return ngtcp2_conn_in_draining_period(conn); }
size_t ptt_conn_get_num_scid(ngtcp2_conn *conn) { return ngtcp2_conn_get_scid(conn, NULL); }
int ptt_conn_early_data_rejected(ngtcp2_conn *conn) { return ngtcp2_conn_tls_early_data_rejected(conn); }
int ptt_conn_shutdown_stream(ngtcp2_conn *conn, int64_t stream_id, uint64_t app_error_code) {
  return ngtcp2_conn_shutdown_stream(conn, 0, stream_id, app_error_code);
}
int ptt_conn_shutdown_stream_read(ngtcp2_conn *conn, int64_t stream_id, uint64_t app_error_code) {
  return ngtcp2_conn_shutdown_stream_read(conn, 0, stream_id, app_error_code);
}
#else
int ptt_conn_in_closing_period(ngtcp2_conn *conn) { return ngtcp2_conn_is_in_closing_period(conn); }
int ptt_conn_in_draining_period(ngtcp2_conn *conn) { return ngtcp2_conn_is_in_draining_period(conn); }
size_t ptt_conn_get_num_scid(ngtcp2_conn *conn) { return ngtcp2_conn_get_num_scid(conn); }
int ptt_conn_early_data_rejected(ngtcp2_conn *conn) { return ngtcp2_conn_early_data_rejected(conn); }
int ptt_conn_shutdown_stream(ngtcp2_conn *conn, int64_t stream_id, uint64_t app_error_code) {
  return ngtcp2_conn_shutdown_stream(conn, stream_id, app_error_code);
}
int ptt_conn_shutdown_stream_read(ngtcp2_conn *conn, int64_t stream_id, uint64_t app_error_code) {
  return ngtcp2_conn_shutdown_stream_read(conn, stream_id, app_error_code);
}
#endif

void ptt_conn_get_stats(ngtcp2_conn *conn, ptt_conn_stats *stats) {
  memset(stats, 0, sizeof(*stats));
#if PTT_NGTCP2_1X
  ngtcp2_conn_info info;
  ngtcp2_conn_get_conn_info(conn, &info);
  /* 1.x sets min_rtt and the first sample's time together (ngtcp2_conn_update_rtt). */
  stats->rtt_sampled = info.min_rtt != UINT64_MAX;
#else
  ngtcp2_conn_stat info;
  ngtcp2_conn_get_conn_stat(conn, &info);
  stats->rtt_sampled = info.first_rtt_sample_ts != UINT64_MAX;
  stats->pto_count = info.pto_count;
#endif
  stats->latest_rtt = info.latest_rtt;
  stats->smoothed_rtt = info.smoothed_rtt;
  stats->min_rtt = info.min_rtt;
  stats->cwnd = info.cwnd;
  stats->bytes_in_flight = info.bytes_in_flight;
}

uint64_t ptt_conn_pacing_wait(ngtcp2_conn *conn, uint64_t bytes) {
#if PTT_NGTCP2_1X
  (void)conn;
  (void)bytes;
  return 0;
#else
  /* 0.12.1: bytes / pacing rate, the rate being the congestion controller's or 1.25 cwnd per smoothed RTT. */
  ngtcp2_conn_stat stat;
  ngtcp2_conn_get_conn_stat(conn, &stat);
  double rate = stat.pacing_rate > 0 ? stat.pacing_rate
                                     : (stat.smoothed_rtt > 0 ? (double)stat.cwnd / (double)stat.smoothed_rtt * 1.25
                                                              : 0);
  return rate > 0 ? (uint64_t)((double)bytes / rate) : 0;
#endif
}

/* ---- Settings and transport parameters ---- */

void ptt_settings_set_token(ngtcp2_settings *settings, const uint8_t *token, size_t tokenlen) {
#if PTT_NGTCP2_1X
  settings->token = token;
  settings->tokenlen = tokenlen;
  settings->token_type = NGTCP2_TOKEN_TYPE_UNKNOWN;
  if (tokenlen > 0 && token[0] == NGTCP2_CRYPTO_TOKEN_MAGIC_RETRY) settings->token_type = NGTCP2_TOKEN_TYPE_RETRY;
  if (tokenlen > 0 && token[0] == NGTCP2_CRYPTO_TOKEN_MAGIC_REGULAR) settings->token_type = NGTCP2_TOKEN_TYPE_NEW_TOKEN;
#else
  settings->token.base = (uint8_t *)token;
  settings->token.len = tokenlen;
#endif
}

void ptt_settings_set_qlog(ngtcp2_settings *settings, const ngtcp2_cid *odcid, ngtcp2_qlog_write write) {
#if PTT_NGTCP2_1X
  (void)odcid;
  settings->qlog_write = write;
#else
  settings->qlog.odcid = *odcid;
  settings->qlog.write = write;
#endif
}

void ptt_transport_params_set_original_dcid(ngtcp2_transport_params *params, const ngtcp2_cid *odcid) {
  params->original_dcid = *odcid;
#if PTT_NGTCP2_1X
  params->original_dcid_present = 1;
#endif
}

ngtcp2_ssize ptt_conn_encode_0rtt_transport_params(ngtcp2_conn *conn, uint8_t *dest, size_t destlen) {
#if PTT_NGTCP2_1X
  return ngtcp2_conn_encode_0rtt_transport_params(conn, dest, destlen);
#else
  const ngtcp2_transport_params *remote = ngtcp2_conn_get_remote_transport_params(conn);
  if (remote == NULL) return NGTCP2_ERR_INVALID_STATE;
  return ngtcp2_encode_transport_params(dest, destlen, NGTCP2_TRANSPORT_PARAMS_TYPE_ENCRYPTED_EXTENSIONS, remote);
#endif
}

int ptt_conn_set_0rtt_transport_params(ngtcp2_conn *conn, const uint8_t *data, size_t datalen) {
#if PTT_NGTCP2_1X
  return ngtcp2_conn_decode_and_set_0rtt_transport_params(conn, data, datalen);
#else
  ngtcp2_transport_params params;
  memset(&params, 0, sizeof(params));
  int rv = ngtcp2_decode_transport_params(&params, NGTCP2_TRANSPORT_PARAMS_TYPE_ENCRYPTED_EXTENSIONS, data, datalen);
  if (rv != 0) return rv;
  ngtcp2_conn_set_early_remote_transport_params(conn, &params);
  return 0;
#endif
}

/* ---- QUIC versions ---- */

#if PTT_NGTCP2_1X
/* In order of preference: a server moves a client that offers v2 there (RFC 9368 compatible negotiation). */
static const uint32_t server_versions[] = {NGTCP2_PROTO_VER_V2, NGTCP2_PROTO_VER_V1};
static const uint32_t v1_then_v2[] = {NGTCP2_PROTO_VER_V1, NGTCP2_PROTO_VER_V2};
static const uint32_t v2_then_v1[] = {NGTCP2_PROTO_VER_V2, NGTCP2_PROTO_VER_V1};
_Static_assert(NGTCP2_PROTO_VER_V2 == PTT_QUIC_V2, "RFC 9369's codepoint");
#else
static const uint32_t server_versions[] = {NGTCP2_PROTO_VER_V1};
#endif

int ptt_ngtcp2_supports_v2(void) { return PTT_NGTCP2_1X; }

const uint32_t *ptt_server_versions(size_t *count) {
  *count = sizeof(server_versions) / sizeof(server_versions[0]);
  return server_versions;
}

void ptt_settings_set_versions(ngtcp2_settings *settings, int is_server, uint32_t chosen, int negotiate) {
#if PTT_NGTCP2_1X
  /* Static arrays: ngtcp2 copies them when the connection is created, and they outlive it anyway. */
  if (is_server) {
    /* ngtcp2 moves the client to the first of preferred_versions that the client's version_information offers:
     * v2 first upgrades a client that offers it; the client's own version first keeps it there (the client offers
     * its chosen version, RFC 9368 section 5). */
    const uint32_t *order = negotiate || chosen == NGTCP2_PROTO_VER_V2 ? v2_then_v1 : v1_then_v2;
    settings->preferred_versions = order;
    settings->preferred_versionslen = 2;
    settings->available_versions = order;
    settings->available_versionslen = 2;
  } else {
    int v2 = chosen == NGTCP2_PROTO_VER_V2;
    /* preferred_versions must hold the chosen version; it is what an answer to Version Negotiation may pick.
     * available_versions goes into version_information: v2 first, so a peer that follows the client's order
     * (aioquic) moves to v2 too. */
    settings->preferred_versions = v2 ? v2_then_v1 : v1_then_v2;
    settings->preferred_versionslen = negotiate ? 2 : 1;
    settings->available_versions = negotiate ? v2_then_v1 : (v2 ? v2_then_v1 : v1_then_v2);
    settings->available_versionslen = negotiate ? 2 : 1;
  }
#else
  (void)settings;
  (void)is_server;
  (void)chosen;
  (void)negotiate;
#endif
}

/* ---- Packet headers ---- */

const uint8_t *ptt_pkt_hd_token(const ngtcp2_pkt_hd *hd, size_t *tokenlen) {
#if PTT_NGTCP2_1X
  *tokenlen = hd->tokenlen;
  return hd->tokenlen > 0 ? hd->token : NULL;
#else
  *tokenlen = hd->token.len;
  return hd->token.len > 0 ? hd->token.base : NULL;
#endif
}

/* ---- Callback adapters ---- */

/* The transport's callbacks behind the adapters: one function per process (set before any connection starts, the
 * same value every time), so a relaxed atomic is enough. */
static _Atomic(ptt_path_validation_cb) path_validation_target;
static _Atomic(ptt_recv_new_token_cb) recv_new_token_target;

#if PTT_NGTCP2_1X
static int path_validation_adapter(ngtcp2_conn *conn, uint32_t flags, const ngtcp2_path *path,
                                   const ngtcp2_path *fallback_path, ngtcp2_path_validation_result res,
                                   void *user_data) {
  (void)fallback_path;
  ptt_path_validation_cb target = atomic_load_explicit(&path_validation_target, memory_order_relaxed);
  return target(conn, flags, path, res == NGTCP2_PATH_VALIDATION_RESULT_SUCCESS, user_data);
}

static int recv_new_token_adapter(ngtcp2_conn *conn, const uint8_t *token, size_t tokenlen, void *user_data) {
  ptt_recv_new_token_cb target = atomic_load_explicit(&recv_new_token_target, memory_order_relaxed);
  return target(conn, token, tokenlen, user_data);
}
#else
static int path_validation_adapter(ngtcp2_conn *conn, uint32_t flags, const ngtcp2_path *path,
                                   ngtcp2_path_validation_result res, void *user_data) {
  ptt_path_validation_cb target = atomic_load_explicit(&path_validation_target, memory_order_relaxed);
  return target(conn, flags, path, res == NGTCP2_PATH_VALIDATION_RESULT_SUCCESS, user_data);
}

static int recv_new_token_adapter(ngtcp2_conn *conn, const ngtcp2_vec *token, void *user_data) {
  ptt_recv_new_token_cb target = atomic_load_explicit(&recv_new_token_target, memory_order_relaxed);
  return target(conn, token->base, token->len, user_data);
}
#endif

void ptt_callbacks_set_path_validation(ngtcp2_callbacks *callbacks, ptt_path_validation_cb callback) {
  atomic_store_explicit(&path_validation_target, callback, memory_order_relaxed);
  callbacks->path_validation = path_validation_adapter;
}

void ptt_callbacks_set_recv_new_token(ngtcp2_callbacks *callbacks, ptt_recv_new_token_cb callback) {
  atomic_store_explicit(&recv_new_token_target, callback, memory_order_relaxed);
  callbacks->recv_new_token = recv_new_token_adapter;
}

void ptt_callbacks_set_early_data_rejected(ngtcp2_callbacks *callbacks, ptt_early_data_rejected_cb callback) {
#if PTT_NGTCP2_1X
  callbacks->tls_early_data_rejected = callback;
#else
  callbacks->early_data_rejected = callback;
#endif
}
