#define _GNU_SOURCE
#include "ptt_udp_batch.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>


/* Segments one GSO message may carry, and its byte limit (the kernel's UDP_MAX_SEGMENTS and an IP datagram). */
enum { GSO_MAX_SEGMENTS = 64, GSO_MAX_BYTES = 65000, CONTROL_SPACE = 96 };

typedef struct entry {
  size_t offset, length;
  struct sockaddr_storage remote, local;
  socklen_t remotelen, locallen;
  uint32_t ecn;
} entry;

struct ptt_udp_batch {
  uint8_t *arena;
  size_t arena_size, used;   /* bytes in the arena, and how many hold queued packets */
  entry *entries;
  size_t max_packets, head, count;  /* queued packets are entries[head ..< count] */
  size_t capacity;                  /* packets the arrays below hold now: grown by doubling up to max_packets */
  struct mmsghdr *messages;
  struct iovec *iovecs;
  uint8_t (*controls)[CONTROL_SPACE];
  size_t *first_entry, *entry_count;  /* per message: which packets it carries */
  int gso;
  int family_fd, family;  /* the address family of socket family_fd, asked once (-1: not asked yet) */
  ptt_udp_batch_stats stats;
};

int ptt_socket_family(int fd) {
  int domain = 0;
  socklen_t length = sizeof(domain);
  return getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &length) == 0 ? domain : 0;
}

size_t ptt_udp_fill_cmsgs(uint8_t *control, size_t space, int family, const struct sockaddr *local,
                          socklen_t locallen, uint32_t ecn, size_t segment_size) {
  memset(control, 0, space);
  size_t used = 0;
  struct cmsghdr *c = (struct cmsghdr *)control;
  if (family == AF_INET6) {
    int tclass = (int)ecn;
    c->cmsg_level = IPPROTO_IPV6;
    c->cmsg_type = IPV6_TCLASS;
    c->cmsg_len = CMSG_LEN(sizeof(tclass));
    memcpy(CMSG_DATA(c), &tclass, sizeof(tclass));
    used += CMSG_SPACE(sizeof(tclass));
  } else if (family == AF_INET) {
    int tos = (int)ecn;
    c->cmsg_level = IPPROTO_IP;
    c->cmsg_type = IP_TOS;
    c->cmsg_len = CMSG_LEN(sizeof(tos));
    memcpy(CMSG_DATA(c), &tos, sizeof(tos));
    used += CMSG_SPACE(sizeof(tos));
  }
  if (local && locallen) {
    c = (struct cmsghdr *)(control + used);
    if (((const struct sockaddr *)local)->sa_family == AF_INET6) {
      struct in6_pktinfo pi;
      memset(&pi, 0, sizeof(pi));
      pi.ipi6_addr = ((const struct sockaddr_in6 *)local)->sin6_addr;
      c->cmsg_level = IPPROTO_IPV6;
      c->cmsg_type = IPV6_PKTINFO;
      c->cmsg_len = CMSG_LEN(sizeof(pi));
      memcpy(CMSG_DATA(c), &pi, sizeof(pi));
      used += CMSG_SPACE(sizeof(pi));
    } else {
      struct in_pktinfo pi;
      memset(&pi, 0, sizeof(pi));
      pi.ipi_spec_dst = ((const struct sockaddr_in *)local)->sin_addr;
      c->cmsg_level = IPPROTO_IP;
      c->cmsg_type = IP_PKTINFO;
      c->cmsg_len = CMSG_LEN(sizeof(pi));
      memcpy(CMSG_DATA(c), &pi, sizeof(pi));
      used += CMSG_SPACE(sizeof(pi));
    }
  }
  if (segment_size > 0) {
    uint16_t seg = (uint16_t)segment_size;
    c = (struct cmsghdr *)(control + used);
    c->cmsg_level = SOL_UDP;
    c->cmsg_type = UDP_SEGMENT;
    c->cmsg_len = CMSG_LEN(sizeof(seg));
    memcpy(CMSG_DATA(c), &seg, sizeof(seg));
    used += CMSG_SPACE(sizeof(seg));
  }
  return used;
}

/* Resizes the per-packet arrays to hold `capacity` packets. Nothing in them needs zeroing: a packet's entry is
 * written whole when it is committed, and the messages, vectors and control blocks are rebuilt at each flush. No
 * pointer into them outlives a flush, so moving them is safe. On failure the batch keeps its old capacity (an
 * array already moved is just larger than needed). */
static int resize_arrays(ptt_udp_batch *b, size_t capacity) {
  void *p;
  if (!(p = realloc(b->entries, capacity * sizeof(entry)))) return 0;
  b->entries = p;
  if (!(p = realloc(b->messages, capacity * sizeof(struct mmsghdr)))) return 0;
  b->messages = p;
  if (!(p = realloc(b->iovecs, capacity * sizeof(struct iovec)))) return 0;
  b->iovecs = p;
  if (!(p = realloc(b->controls, capacity * CONTROL_SPACE))) return 0;
  b->controls = p;
  if (!(p = realloc(b->first_entry, capacity * sizeof(size_t)))) return 0;
  b->first_entry = p;
  if (!(p = realloc(b->entry_count, capacity * sizeof(size_t)))) return 0;
  b->entry_count = p;
  b->capacity = capacity;
  return 1;
}

/* Packets a new batch has room for before it grows: a client's connection rarely queues more per turn, so its
 * socket's batch stays small (about 3 KiB instead of 30 KiB for 64 packets); a relay's grows once. */
enum { INITIAL_CAPACITY = 8 };

ptt_udp_batch *ptt_udp_batch_create(size_t max_packets) {
  if (max_packets < 1 || max_packets > 1024) return NULL;
  ptt_udp_batch *b = calloc(1, sizeof(*b));
  if (!b) return NULL;
  b->max_packets = max_packets;
  b->gso = 1;
  b->family_fd = -1;
  if (!resize_arrays(b, max_packets < INITIAL_CAPACITY ? max_packets : INITIAL_CAPACITY)) {
    ptt_udp_batch_destroy(b);
    return NULL;
  }
  return b;
}

/* Room in the arrays for one more packet: grows them (doubling, at most max_packets) when full. */
static int ensure_room(ptt_udp_batch *b) {
  if (b->count < b->capacity) return 1;
  if (b->capacity >= b->max_packets) return 0;
  size_t capacity = b->capacity * 2 < b->max_packets ? b->capacity * 2 : b->max_packets;
  return resize_arrays(b, capacity);
}

void ptt_udp_batch_destroy(ptt_udp_batch *b) {
  if (!b) return;
  free(b->arena);
  free(b->entries);
  free(b->messages);
  free(b->iovecs);
  free(b->controls);
  free(b->first_entry);
  free(b->entry_count);
  free(b);
}

uint8_t *ptt_udp_batch_reserve(ptt_udp_batch *b, size_t length) {
  if (!ensure_room(b)) return NULL;
  if (b->used + length > b->arena_size) {
    size_t size = b->arena_size ? b->arena_size : 4096;
    while (size < b->used + length) size *= 2;
    uint8_t *grown = realloc(b->arena, size);  /* entries hold offsets, so moving the arena is safe */
    if (!grown) return NULL;
    b->arena = grown;
    b->arena_size = size;
  }
  return b->arena + b->used;
}

void ptt_udp_batch_commit(ptt_udp_batch *b, size_t length, const struct sockaddr *remote, socklen_t remotelen,
                          const struct sockaddr *local, socklen_t locallen, uint32_t ecn) {
  if (length == 0 || b->count >= b->capacity || b->used + length > b->arena_size) return;
  entry *e = &b->entries[b->count++];
  e->offset = b->used;
  e->length = length;
  e->remotelen = remote && remotelen <= sizeof(e->remote) ? remotelen : 0;
  if (e->remotelen) memcpy(&e->remote, remote, e->remotelen);
  e->locallen = local && locallen <= sizeof(e->local) ? locallen : 0;
  if (e->locallen) memcpy(&e->local, local, e->locallen);
  e->ecn = ecn;
  b->used += length;
}

size_t ptt_udp_batch_count(const ptt_udp_batch *b) { return b->count - b->head; }

static int same_route(const entry *a, const entry *b) {
  return a->ecn == b->ecn && a->remotelen == b->remotelen && a->locallen == b->locallen &&
         memcmp(&a->remote, &b->remote, a->remotelen) == 0 && memcmp(&a->local, &b->local, a->locallen) == 0;
}

/* The address family of `fd`, asked of the kernel once per socket: a connected socket's packets carry no address
 * to read it from, and a client flushes a few times per handshake. */
static int socket_family(ptt_udp_batch *b, int fd) {
  if (fd != b->family_fd) {
    b->family = ptt_socket_family(fd);
    b->family_fd = fd;
  }
  return b->family;
}

/* Groups the queued packets into messages: a run of equal-size packets to one route (the last may be shorter)
 * becomes one GSO message when GSO is on. Returns the number of messages. */
static size_t build_messages(ptt_udp_batch *b, int fd, int gso) {
  size_t messages = 0;
  size_t i = b->head;
  while (i < b->count) {
    const entry *first = &b->entries[i];
    size_t n = 1, bytes = first->length;
    if (gso) {
      while (i + n < b->count && n < GSO_MAX_SEGMENTS) {
        const entry *next = &b->entries[i + n];
        const entry *previous = &b->entries[i + n - 1];
        if (previous->length != first->length || next->length > first->length || bytes + next->length > GSO_MAX_BYTES ||
            !same_route(first, next))
          break;
        bytes += next->length;
        n++;
      }
    }
    struct mmsghdr *m = &b->messages[messages];
    memset(m, 0, sizeof(*m));
    b->iovecs[messages].iov_base = b->arena + first->offset;  /* the run's packets are contiguous */
    b->iovecs[messages].iov_len = bytes;
    m->msg_hdr.msg_iov = &b->iovecs[messages];
    m->msg_hdr.msg_iovlen = 1;
    m->msg_hdr.msg_name = first->remotelen ? (void *)&first->remote : NULL;
    m->msg_hdr.msg_namelen = first->remotelen;
    int family = first->remotelen ? first->remote.ss_family : (first->locallen ? first->local.ss_family : 0);
    if (family == 0) family = socket_family(b, fd);
    size_t used = ptt_udp_fill_cmsgs(b->controls[messages], CONTROL_SPACE, family,
                                     first->locallen ? (const struct sockaddr *)&first->local : NULL, first->locallen, first->ecn,
                                     n > 1 ? first->length : 0);
    m->msg_hdr.msg_control = used ? b->controls[messages] : NULL;
    m->msg_hdr.msg_controllen = used;
    b->first_entry[messages] = i;
    b->entry_count[messages] = n;
    messages++;
    i += n;
  }
  return messages;
}

static void reset_if_empty(ptt_udp_batch *b) {
  if (b->head < b->count) return;
  b->head = b->count = 0;
  b->used = 0;
}

int ptt_udp_batch_flush(ptt_udp_batch *b, int fd, int gso) {
  while (b->head < b->count) {
    int use_gso = gso && b->gso;
    size_t messages = build_messages(b, fd, use_gso);
    size_t done = 0;
    int rebuild = 0;
    while (done < messages && !rebuild) {
      int n = sendmmsg(fd, &b->messages[done], (unsigned int)(messages - done), MSG_DONTWAIT);
      b->stats.syscalls++;
      if (n > 0) {
        for (size_t m = done; m < done + (size_t)n; m++) {
          b->stats.packets_sent += b->entry_count[m];
          if (b->entry_count[m] > 1) b->stats.gso_messages++;
        }
        done += (size_t)n;
        b->head = b->first_entry[done - 1] + b->entry_count[done - 1];
        continue;
      }
      int error = n < 0 ? errno : EIO;
      if (error == EINTR) continue;
      if (error == EAGAIN || error == EWOULDBLOCK) {
        b->stats.would_block++;
        return -EAGAIN;
      }
      if (b->entry_count[done] > 1 && (error == EIO || error == EINVAL || error == EOPNOTSUPP)) {
        b->gso = 0;  /* this path cannot segment: send the same packets again one per message */
        rebuild = 1;
        break;
      }
      b->stats.dropped += b->entry_count[done];
      b->stats.last_error = error;
      b->head = b->first_entry[done] + b->entry_count[done];
      done++;
    }
  }
  reset_if_empty(b);
  return 0;
}

void ptt_udp_batch_get_stats(const ptt_udp_batch *b, ptt_udp_batch_stats *stats, int *gso_enabled) {
  *stats = b->stats;
  *gso_enabled = b->gso;
}
