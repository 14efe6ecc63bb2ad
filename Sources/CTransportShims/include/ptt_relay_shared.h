/*
 * What the worker processes of one relay (`ptt-transport serve --workers N`) count together, so its limits hold for
 * the relay as a whole: live connections (per worker, summed), the 0-RTT grants of its budget (a sliding window), and
 * per source (an IPv4 address or an IPv6 /64) the live connections of each account and the TCP handshakes pending.
 *
 * The supervisor creates the region in a memfd (ptt_relay_shared_create) and hands the descriptor down to every
 * worker, like the sockets; each maps it MAP_SHARED. Counts are kept per worker, so a worker that dies gives back what
 * it held (ptt_relay_shared_release_worker, called by the supervisor before it starts the worker again). The live
 * connection counts are atomics; everything else is under one process-shared robust mutex: a worker that dies holding
 * it does not wedge the others (the next locker repairs the table and goes on). Every call is O(1) but the two that
 * walk the table (release_worker, and the repair after a dead lock owner). Nothing here allocates after creation.
 */
#ifndef PTT_RELAY_SHARED_H
#define PTT_RELAY_SHARED_H

#include <stddef.h>
#include <stdint.h>

/* The most worker processes one region serves (`--workers` is 2 to 64). */
#define PTT_RELAY_MAX_WORKERS 64
/* Accounts per source: QUIC unvalidated, QUIC validated, TCP unvalidated, TCP validated (ledger * 2 + validated). */
#define PTT_RELAY_ACCOUNTS 4

typedef struct ptt_relay_shared ptt_relay_shared;

/* What a region is made for. */
typedef struct {
  uint32_t workers;        /* 1 ... PTT_RELAY_MAX_WORKERS */
  uint32_t sources;        /* sources tracked at once at most (rounded up to a power of two, at least 64) */
  uint32_t grant_capacity; /* 0-RTT grants per window, at least 1 */
} ptt_relay_shared_config;

/* Creates an initialised region in a sealed memfd (close-on-exec); returns its descriptor or -errno (-EINVAL for a
 * configuration out of range). */
int ptt_relay_shared_create(const ptt_relay_shared_config *config);
/* Maps the region of `fd` (the descriptor stays the caller's). NULL with *error set: -errno, or -EINVAL when `fd`
 * holds no region of this layout. */
ptt_relay_shared *ptt_relay_shared_map(int fd, int *error);
void ptt_relay_shared_unmap(ptt_relay_shared *shared);
uint32_t ptt_relay_shared_workers(const ptt_relay_shared *shared);

/* Live connections: `worker`'s count moves by `delta` (atomically); the relay's is the sum. */
void ptt_relay_shared_add_connections(ptt_relay_shared *shared, uint32_t worker, int64_t delta);
int64_t ptt_relay_shared_connections(const ptt_relay_shared *shared);

/* Takes one 0-RTT grant at `now` that counts until `now + window` (any unit, one clock for every caller): 1, or 0 when
 * the capacity is taken within the window (or the lock is unrecoverable: fail closed). */
int ptt_relay_shared_take_grant(ptt_relay_shared *shared, int64_t now, int64_t window);
/* Gives back the latest grant (taken for a claim that created nothing). */
void ptt_relay_shared_give_back_grant(ptt_relay_shared *shared);
/* Grants still counted at `now`. */
uint32_t ptt_relay_shared_grants_used(ptt_relay_shared *shared, int64_t now);

/* One source's budget per account (`SourceLimits`): live connections, new connections per second and the burst. */
typedef struct {
  uint32_t max_live;
  uint32_t per_second;
  uint32_t burst;
} ptt_source_limits;

enum {
  PTT_SOURCE_ADMITTED = 0,
  PTT_SOURCE_TOO_MANY_LIVE = 1, /* the source holds max_live in this account (all workers) */
  PTT_SOURCE_TOO_FAST = 2,      /* its bucket is empty */
  PTT_SOURCE_UNAVAILABLE = 3,   /* no room for another source, or the lock is unrecoverable: refuse (fail closed) */
};

/* Charges a new connection of `worker` from source (high, low) to `account` at `now` (monotonic ns): a token from the
 * source's bucket and a place in its live count, as SourceLedger does; a refused source gets no new entry. */
int ptt_relay_shared_admit_source(ptt_relay_shared *shared, uint32_t worker, uint64_t high, uint64_t low,
                                  uint32_t account, const ptt_source_limits *limits, uint64_t now);
/* A connection `worker` charged to (high, low, account) is gone. */
void ptt_relay_shared_release_source(ptt_relay_shared *shared, uint32_t worker, uint64_t high, uint64_t low,
                                     uint32_t account, uint64_t now);

/* A TCP handshake of `worker` from source (high, low) starts: 1 when the source has fewer than `per_source` pending
 * over all workers (counted), 0 otherwise (or no room, or an unrecoverable lock). */
int ptt_relay_shared_acquire_pending(ptt_relay_shared *shared, uint32_t worker, uint64_t high, uint64_t low,
                                     uint32_t per_source, uint64_t now);
/* That handshake ended (ready, failed, evicted, closed). */
void ptt_relay_shared_release_pending(ptt_relay_shared *shared, uint32_t worker, uint64_t high, uint64_t low,
                                      uint64_t now);
/* Handshakes pending from (high, low) over all workers. */
uint32_t ptt_relay_shared_pending(ptt_relay_shared *shared, uint64_t high, uint64_t low);
/* Live connections of (high, low, account) over all workers. */
uint32_t ptt_relay_shared_live(ptt_relay_shared *shared, uint64_t high, uint64_t low, uint32_t account);
/* Sources tracked now. */
uint32_t ptt_relay_shared_tracked_sources(ptt_relay_shared *shared);

/* `worker` is gone: its connections, its sources' live counts and its pending handshakes are given back. */
void ptt_relay_shared_release_worker(ptt_relay_shared *shared, uint32_t worker);

/* Takes the region's lock and returns holding it (0, or an errno): for a test that makes the holder end (a thread or
 * a process) and checks that the next caller takes over. Nothing else calls it. */
int ptt_relay_shared_hold_lock(ptt_relay_shared *shared);

#endif
