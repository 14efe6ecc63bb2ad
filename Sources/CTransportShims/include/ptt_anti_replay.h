/*
 * Moving the start of a GnuTLS anti-replay context's recording back in time, so that a server whose anti-replay
 * memory outlives its process (a store shared by a fleet) accepts early data for tickets issued before the context
 * existed. GnuTLS 3.7 and 3.8 refuse early data for any ticket created before the context's start time
 * (lib/tls13/anti_replay.c, _gnutls_anti_replay_check) and offer no setter for it; the context is an opaque struct.
 *
 * The struct's layout is the same in every 3.7.x and 3.8.x release (window, start_time, db_add_func, db_ptr).
 * ptt_anti_replay_layout_known checks the library version AND probes the layout through the public setters
 * before ptt_anti_replay_set_start may be used; any other version or layout: 0, and the caller keeps GnuTLS'
 * own start time (today's safe refusal).
 */
#ifndef PTT_ANTI_REPLAY_H
#define PTT_ANTI_REPLAY_H

#include <stdint.h>
#include <gnutls/gnutls.h>

/* 1 when `context` (freshly made by gnutls_anti_replay_init, nothing set yet) has the layout this shim knows: a
 * GnuTLS 3.7.x or 3.8.x whose window, add function and pointer fields read back what the public setters wrote.
 * The probe leaves the window, add function and pointer set to dummies: set them after calling this. */
int ptt_anti_replay_layout_known(gnutls_anti_replay_t context);

/* Sets the context's recording start to `unix_seconds` (CLOCK_REALTIME seconds): GnuTLS then refuses early data
 * only for tickets created before that time. Only after ptt_anti_replay_layout_known returned 1 for `context`. */
void ptt_anti_replay_set_start(gnutls_anti_replay_t context, int64_t unix_seconds);

#endif
