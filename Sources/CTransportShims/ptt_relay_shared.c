#define _GNU_SOURCE
#include "ptt_relay_shared.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC 0x7074742d72656c79ULL /* "ptt-rely" */
#define LAYOUT 1
#define MAX_SOURCES (1u << 20)
#define MAX_GRANTS (1u << 26)
/* Per source and worker: live connections per account, then TCP handshakes pending. */
#define COUNTS (PTT_RELAY_ACCOUNTS + 1)
#define PENDING PTT_RELAY_ACCOUNTS

/* One source in the open-addressing table (linear probing, removal by backward shift: no tombstones). */
typedef struct {
  uint64_t high;
  uint64_t low;
  uint32_t used;    /* written last when an entry is made, cleared when it goes */
  uint32_t started; /* bit a: account a's bucket holds a value */
  uint64_t expires; /* monotonic ns after which an entry that holds nothing may go (its buckets are full again) */
  double tokens[PTT_RELAY_ACCOUNTS];
  uint64_t updated[PTT_RELAY_ACCOUNTS];
} source_slot;

typedef struct {
  uint32_t value[COUNTS];
} worker_counts;

struct ptt_relay_shared {
  uint64_t magic;
  uint32_t layout;
  uint32_t workers;
  uint64_t size;
  uint64_t seed; /* keys the table's hash: sources are chosen by strangers */
  uint32_t slot_count;
  uint32_t tracked;
  uint32_t cursor; /* where the expiry sweep looks next */
  uint32_t grant_capacity;
  uint32_t grant_head;
  uint32_t grant_count;
  uint64_t slots_offset;
  uint64_t counts_offset;
  uint64_t grants_offset;
  pthread_mutex_t lock;
  _Atomic int64_t connections[PTT_RELAY_MAX_WORKERS];
};

static uint64_t align(uint64_t value) { return (value + 63) & ~(uint64_t)63; }

static source_slot *slot_at(ptt_relay_shared *s, uint32_t i) {
  return (source_slot *)((char *)s + s->slots_offset) + i;
}

static worker_counts *counts_at(ptt_relay_shared *s, uint32_t i, uint32_t worker) {
  return (worker_counts *)((char *)s + s->counts_offset) + (uint64_t)i * s->workers + worker;
}

static int64_t *grants(ptt_relay_shared *s) { return (int64_t *)((char *)s + s->grants_offset); }

static uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

static uint32_t home(const ptt_relay_shared *s, uint64_t high, uint64_t low) {
  return (uint32_t)(mix(mix(high ^ s->seed) ^ low) & (s->slot_count - 1));
}

/* ---- the table ---- */

static int64_t find(ptt_relay_shared *s, uint64_t high, uint64_t low) {
  uint32_t mask = s->slot_count - 1;
  uint32_t i = home(s, high, low);
  for (uint32_t probed = 0; probed < s->slot_count; probed++, i = (i + 1) & mask) {
    source_slot *slot = slot_at(s, i);
    if (!slot->used) return -1;
    if (slot->high == high && slot->low == low) return i;
  }
  return -1;
}

/* A new entry for (high, low), known absent; -1 when the table is at three quarters (its probes stay short). */
static int64_t insert(ptt_relay_shared *s, uint64_t high, uint64_t low) {
  if ((uint64_t)s->tracked * 4 >= (uint64_t)s->slot_count * 3) return -1;
  uint32_t mask = s->slot_count - 1;
  uint32_t i = home(s, high, low);
  while (slot_at(s, i)->used) i = (i + 1) & mask;
  source_slot *slot = slot_at(s, i);
  memset(slot, 0, sizeof(*slot));
  slot->high = high;
  slot->low = low;
  memset(counts_at(s, i, 0), 0, sizeof(worker_counts) * s->workers);
  slot->used = 1;
  s->tracked++;
  return i;
}

/* Removes entry `i`, moving later entries of its cluster back so that every entry stays reachable from its home
 * (Knuth's algorithm R). A process that dies midway leaves at worst a duplicate, which the repair merges. */
static void remove_at(ptt_relay_shared *s, uint32_t i) {
  uint32_t mask = s->slot_count - 1;
  uint32_t j = i;
  for (;;) {
    j = (j + 1) & mask;
    source_slot *next = slot_at(s, j);
    if (!next->used) break;
    uint32_t k = home(s, next->high, next->low);
    int stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
    if (stays) continue;
    memcpy(slot_at(s, i), next, sizeof(*next));
    memcpy(counts_at(s, i, 0), counts_at(s, j, 0), sizeof(worker_counts) * s->workers);
    i = j;
  }
  slot_at(s, i)->used = 0;
  s->tracked--;
}

static uint64_t total(ptt_relay_shared *s, uint32_t i, int column) {
  uint64_t sum = 0;
  for (uint32_t w = 0; w < s->workers; w++) sum += counts_at(s, i, w)->value[column];
  return sum;
}

static int holds_nothing(ptt_relay_shared *s, uint32_t i) {
  for (uint32_t w = 0; w < s->workers; w++) {
    worker_counts *counts = counts_at(s, i, w);
    for (int c = 0; c < COUNTS; c++)
      if (counts->value[c] != 0) return 0;
  }
  return 1;
}

static int removable(ptt_relay_shared *s, uint32_t i, uint64_t now) {
  return now >= slot_at(s, i)->expires && holds_nothing(s, i);
}

/* Looks at up to `steps` slots where the sweep stands and removes those that hold nothing and whose buckets are full
 * again: what a source no longer uses leaves within one pass over the table. */
static void sweep(ptt_relay_shared *s, uint64_t now, int steps) {
  uint32_t mask = s->slot_count - 1;
  for (int n = 0; n < steps; n++) {
    uint32_t i = s->cursor & mask;
    if (slot_at(s, i)->used && removable(s, i, now)) {
      remove_at(s, i); /* a later entry may have moved here: looked at next */
    } else {
      s->cursor = (i + 1) & mask;
    }
  }
}

/* ---- the lock ---- */

/* Rebuilds the table after a process died holding the lock: entries are reinserted from their home, duplicates (a
 * removal cut short) merged keeping the larger counts (fail closed), and the grant ring's indices clamped. */
static void repair(ptt_relay_shared *s) {
  if (s->grant_head >= s->grant_capacity) s->grant_head = 0;
  if (s->grant_count > s->grant_capacity) s->grant_count = s->grant_capacity;
  size_t entry_size = sizeof(source_slot) + sizeof(worker_counts) * s->workers;
  uint32_t used = 0;
  for (uint32_t i = 0; i < s->slot_count; i++) used += slot_at(s, i)->used ? 1 : 0;
  char *saved = used > 0 ? malloc((size_t)used * entry_size) : NULL;
  uint32_t kept = 0;
  for (uint32_t i = 0; i < s->slot_count && saved; i++) {
    if (!slot_at(s, i)->used) continue;
    memcpy(saved + (size_t)kept * entry_size, slot_at(s, i), sizeof(source_slot));
    memcpy(saved + (size_t)kept * entry_size + sizeof(source_slot), counts_at(s, i, 0),
           sizeof(worker_counts) * s->workers);
    kept++;
  }
  for (uint32_t i = 0; i < s->slot_count; i++) slot_at(s, i)->used = 0;
  s->tracked = 0;
  s->cursor = 0;
  for (uint32_t e = 0; e < kept; e++) {
    source_slot *old = (source_slot *)(saved + (size_t)e * entry_size);
    worker_counts *old_counts = (worker_counts *)((char *)old + sizeof(source_slot));
    int64_t at = find(s, old->high, old->low);
    if (at < 0) {
      at = insert(s, old->high, old->low);
      if (at < 0) continue;
      memcpy(slot_at(s, (uint32_t)at), old, sizeof(source_slot));
      memcpy(counts_at(s, (uint32_t)at, 0), old_counts, sizeof(worker_counts) * s->workers);
      continue;
    }
    source_slot *slot = slot_at(s, (uint32_t)at);
    for (int a = 0; a < PTT_RELAY_ACCOUNTS; a++) {
      if (old->tokens[a] < slot->tokens[a]) slot->tokens[a] = old->tokens[a];
      if (old->updated[a] > slot->updated[a]) slot->updated[a] = old->updated[a];
    }
    slot->started |= old->started;
    if (old->expires > slot->expires) slot->expires = old->expires;
    for (uint32_t w = 0; w < s->workers; w++)
      for (int c = 0; c < COUNTS; c++)
        if (old_counts[w].value[c] > counts_at(s, (uint32_t)at, w)->value[c])
          counts_at(s, (uint32_t)at, w)->value[c] = old_counts[w].value[c];
  }
  free(saved); /* without memory for the copy the table starts empty: the sources' counts start again */
}

static int lock(ptt_relay_shared *s) {
  int rv = pthread_mutex_lock(&s->lock);
  if (rv == EOWNERDEAD) {
    repair(s);
    pthread_mutex_consistent(&s->lock);
    return 0;
  }
  return rv;
}

static void unlock(ptt_relay_shared *s) { pthread_mutex_unlock(&s->lock); }

/* ---- creating and mapping ---- */

static int layout(const ptt_relay_shared_config *config, uint32_t *slots, uint64_t offsets[3], uint64_t *size) {
  if (!config || config->workers < 1 || config->workers > PTT_RELAY_MAX_WORKERS || config->sources < 1 ||
      config->sources > MAX_SOURCES || config->grant_capacity < 1 || config->grant_capacity > MAX_GRANTS)
    return -EINVAL;
  uint32_t count = 64;
  while (count < config->sources * 2u) count <<= 1;
  *slots = count;
  offsets[0] = align(sizeof(ptt_relay_shared));
  offsets[1] = align(offsets[0] + (uint64_t)count * sizeof(source_slot));
  offsets[2] = align(offsets[1] + (uint64_t)count * config->workers * sizeof(worker_counts));
  *size = align(offsets[2] + (uint64_t)config->grant_capacity * sizeof(int64_t));
  return 0;
}

int ptt_relay_shared_create(const ptt_relay_shared_config *config) {
  uint32_t slots;
  uint64_t offsets[3];
  uint64_t size;
  int rv = layout(config, &slots, offsets, &size);
  if (rv != 0) return rv;
  int fd = memfd_create("ptt-relay-shared", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return -errno;
  if (ftruncate(fd, (off_t)size) != 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    rv = -errno;
    close(fd);
    return rv;
  }
  ptt_relay_shared *s = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (s == MAP_FAILED) {
    rv = -errno;
    close(fd);
    return rv;
  }
  /* The file starts zeroed: every slot empty, every count 0, the ring empty. */
  s->layout = LAYOUT;
  s->workers = config->workers;
  s->size = size;
  if (getrandom(&s->seed, sizeof(s->seed), 0) != (ssize_t)sizeof(s->seed)) s->seed = mix((uint64_t)size ^ (uint64_t)fd);
  s->slot_count = slots;
  s->grant_capacity = config->grant_capacity;
  s->slots_offset = offsets[0];
  s->counts_offset = offsets[1];
  s->grants_offset = offsets[2];
  for (int w = 0; w < PTT_RELAY_MAX_WORKERS; w++) atomic_init(&s->connections[w], 0);
  pthread_mutexattr_t attributes;
  pthread_mutexattr_init(&attributes);
  pthread_mutexattr_setpshared(&attributes, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&attributes, PTHREAD_MUTEX_ROBUST);
  rv = pthread_mutex_init(&s->lock, &attributes);
  pthread_mutexattr_destroy(&attributes);
  s->magic = rv == 0 ? MAGIC : 0; /* last: a region is valid once it says so */
  munmap(s, size);
  if (rv != 0) {
    close(fd);
    return -rv;
  }
  return fd;
}

ptt_relay_shared *ptt_relay_shared_map(int fd, int *error) {
  struct stat status;
  if (fstat(fd, &status) != 0) {
    *error = -errno;
    return NULL;
  }
  if (status.st_size < (off_t)sizeof(ptt_relay_shared)) {
    *error = -EINVAL;
    return NULL;
  }
  size_t size = (size_t)status.st_size;
  ptt_relay_shared *s = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (s == MAP_FAILED) {
    *error = -errno;
    return NULL;
  }
  ptt_relay_shared_config config = {.workers = s->workers, .sources = s->slot_count / 2,
                                    .grant_capacity = s->grant_capacity};
  uint32_t slots;
  uint64_t offsets[3];
  uint64_t expected;
  int fits = s->magic == MAGIC && s->layout == LAYOUT && s->size == size &&
             layout(&config, &slots, offsets, &expected) == 0 && expected == size && slots == s->slot_count &&
             offsets[0] == s->slots_offset && offsets[1] == s->counts_offset && offsets[2] == s->grants_offset;
  if (!fits) {
    munmap(s, size);
    *error = -EINVAL;
    return NULL;
  }
  return s;
}

void ptt_relay_shared_unmap(ptt_relay_shared *s) {
  if (s) munmap(s, s->size);
}

uint32_t ptt_relay_shared_workers(const ptt_relay_shared *s) { return s->workers; }

/* ---- connections ---- */

void ptt_relay_shared_add_connections(ptt_relay_shared *s, uint32_t worker, int64_t delta) {
  if (worker < s->workers) atomic_fetch_add(&s->connections[worker], delta);
}

int64_t ptt_relay_shared_connections(const ptt_relay_shared *s) {
  int64_t sum = 0;
  for (uint32_t w = 0; w < s->workers; w++) sum += atomic_load(&((ptt_relay_shared *)s)->connections[w]);
  return sum < 0 ? 0 : sum;
}

/* ---- 0-RTT grants: a ring of deadlines, oldest first ---- */

static void expire_grants(ptt_relay_shared *s, int64_t now) {
  int64_t *ring = grants(s);
  while (s->grant_count > 0 && ring[s->grant_head] <= now) {
    s->grant_head = (s->grant_head + 1) % s->grant_capacity;
    s->grant_count--;
  }
}

int ptt_relay_shared_take_grant(ptt_relay_shared *s, int64_t now, int64_t window) {
  if (lock(s) != 0) return 0;
  expire_grants(s, now);
  int taken = s->grant_count < s->grant_capacity;
  if (taken) {
    grants(s)[(s->grant_head + s->grant_count) % s->grant_capacity] = now + (window > 0 ? window : 1);
    s->grant_count++;
  }
  unlock(s);
  return taken;
}

void ptt_relay_shared_give_back_grant(ptt_relay_shared *s) {
  if (lock(s) != 0) return; /* unrecoverable lock: the grant stays counted (fail closed) */
  if (s->grant_count > 0) s->grant_count--;
  unlock(s);
}

uint32_t ptt_relay_shared_grants_used(ptt_relay_shared *s, int64_t now) {
  if (lock(s) != 0) return s->grant_capacity;
  expire_grants(s, now);
  uint32_t used = s->grant_count;
  unlock(s);
  return used;
}

/* ---- sources ---- */

/* SourceLedger's bucket: refilled for the time elapsed, then one token taken when a connection fits. */
static int take(source_slot *slot, uint32_t account, uint64_t live, const ptt_source_limits *limits, uint64_t now) {
  if (!(slot->started & (1u << account))) {
    slot->tokens[account] = (double)limits->burst;
    slot->updated[account] = now;
    slot->started |= 1u << account;
  }
  uint64_t updated = slot->updated[account];
  double elapsed = (double)(now - (now < updated ? now : updated)) / 1e9;
  double tokens = slot->tokens[account] + elapsed * (double)limits->per_second;
  slot->tokens[account] = tokens < (double)limits->burst ? tokens : (double)limits->burst;
  if (now > updated) slot->updated[account] = now;
  if (live >= limits->max_live) return PTT_SOURCE_TOO_MANY_LIVE;
  if (slot->tokens[account] < 1) return PTT_SOURCE_TOO_FAST;
  slot->tokens[account] -= 1;
  return PTT_SOURCE_ADMITTED;
}

int ptt_relay_shared_admit_source(ptt_relay_shared *s, uint32_t worker, uint64_t high, uint64_t low,
                                  uint32_t account, const ptt_source_limits *limits, uint64_t now) {
  if (worker >= s->workers || account >= PTT_RELAY_ACCOUNTS || !limits) return PTT_SOURCE_UNAVAILABLE;
  if (lock(s) != 0) return PTT_SOURCE_UNAVAILABLE;
  sweep(s, now, 2);
  int64_t at = find(s, high, low);
  int result;
  if (at >= 0) {
    result = take(slot_at(s, (uint32_t)at), account, total(s, (uint32_t)at, (int)account), limits, now);
  } else {
    source_slot fresh;
    memset(&fresh, 0, sizeof(fresh));
    result = take(&fresh, account, 0, limits, now);
    if (result == PTT_SOURCE_ADMITTED) { /* never an entry to refuse */
      at = insert(s, high, low);
      if (at < 0) {
        result = PTT_SOURCE_UNAVAILABLE;
      } else {
        source_slot *slot = slot_at(s, (uint32_t)at);
        memcpy(slot->tokens, fresh.tokens, sizeof(fresh.tokens));
        memcpy(slot->updated, fresh.updated, sizeof(fresh.updated));
        slot->started = fresh.started;
      }
    }
  }
  if (result == PTT_SOURCE_ADMITTED) {
    source_slot *slot = slot_at(s, (uint32_t)at);
    counts_at(s, (uint32_t)at, worker)->value[account]++;
    uint64_t refill = (uint64_t)(limits->burst > 0 ? limits->burst : 1) * 1000000000ULL /
                      (limits->per_second > 0 ? limits->per_second : 1);
    if (now + refill > slot->expires) slot->expires = now + refill;
  }
  unlock(s);
  return result;
}

static void release(ptt_relay_shared *s, uint32_t worker, uint64_t high, uint64_t low, int column, uint64_t now) {
  if (worker >= s->workers || lock(s) != 0) return;
  int64_t at = find(s, high, low);
  if (at >= 0) {
    uint32_t *count = &counts_at(s, (uint32_t)at, worker)->value[column];
    if (*count > 0) (*count)--;
    if (removable(s, (uint32_t)at, now)) remove_at(s, (uint32_t)at);
  }
  unlock(s);
}

void ptt_relay_shared_release_source(ptt_relay_shared *s, uint32_t worker, uint64_t high, uint64_t low,
                                     uint32_t account, uint64_t now) {
  if (account < PTT_RELAY_ACCOUNTS) release(s, worker, high, low, (int)account, now);
}

int ptt_relay_shared_acquire_pending(ptt_relay_shared *s, uint32_t worker, uint64_t high, uint64_t low,
                                     uint32_t per_source, uint64_t now) {
  if (worker >= s->workers || lock(s) != 0) return 0;
  sweep(s, now, 2);
  int64_t at = find(s, high, low);
  int acquired = 0;
  if (at >= 0 ? total(s, (uint32_t)at, PENDING) < per_source : per_source > 0) {
    if (at < 0) at = insert(s, high, low);
    if (at >= 0) {
      counts_at(s, (uint32_t)at, worker)->value[PENDING]++;
      acquired = 1;
    }
  }
  unlock(s);
  return acquired;
}

void ptt_relay_shared_release_pending(ptt_relay_shared *s, uint32_t worker, uint64_t high, uint64_t low,
                                      uint64_t now) {
  release(s, worker, high, low, PENDING, now);
}

static uint32_t column_total(ptt_relay_shared *s, uint64_t high, uint64_t low, int column) {
  if (lock(s) != 0) return 0;
  int64_t at = find(s, high, low);
  uint64_t sum = at >= 0 ? total(s, (uint32_t)at, column) : 0;
  unlock(s);
  return sum > UINT32_MAX ? UINT32_MAX : (uint32_t)sum;
}

uint32_t ptt_relay_shared_pending(ptt_relay_shared *s, uint64_t high, uint64_t low) {
  return column_total(s, high, low, PENDING);
}

uint32_t ptt_relay_shared_live(ptt_relay_shared *s, uint64_t high, uint64_t low, uint32_t account) {
  return account < PTT_RELAY_ACCOUNTS ? column_total(s, high, low, (int)account) : 0;
}

uint32_t ptt_relay_shared_tracked_sources(ptt_relay_shared *s) {
  if (lock(s) != 0) return 0;
  uint32_t tracked = s->tracked;
  unlock(s);
  return tracked;
}

/* ---- a worker gone ---- */

void ptt_relay_shared_release_worker(ptt_relay_shared *s, uint32_t worker) {
  if (worker >= s->workers) return;
  atomic_store(&s->connections[worker], 0);
  if (lock(s) != 0) return;
  /* One pass under the lock: a removal elsewhere may shift entries backwards, so no pass may be split. The emptied
   * entries leave with the sweep (or their next release). */
  for (uint32_t i = 0; i < s->slot_count; i++)
    if (slot_at(s, i)->used) memset(counts_at(s, i, worker), 0, sizeof(worker_counts));
  unlock(s);
}

int ptt_relay_shared_hold_lock(ptt_relay_shared *s) { return lock(s); }
