/*
 * A queue of outgoing UDP packets for one socket, sent with sendmmsg (and UDP GSO where consecutive packets go to
 * one destination with equal sizes). Packets are written in place into one growing arena, so a caller (ngtcp2)
 * writes each packet once and the kernel reads it from there. It never blocks and never drops a packet because
 * the socket buffer is full: the unsent tail stays queued, in order, for the next flush.
 */
#ifndef PTT_UDP_BATCH_H
#define PTT_UDP_BATCH_H
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <netinet/udp.h>

/* UDP GSO (Linux 4.18); older headers lack the names. */
#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef SOL_UDP
#define SOL_UDP 17
#endif

typedef struct ptt_udp_batch ptt_udp_batch;

/* What one flush did (counters add up over the batch's life). */
typedef struct ptt_udp_batch_stats {
  uint64_t packets_sent;  /* packets the kernel accepted */
  uint64_t syscalls;      /* sendmmsg calls, EAGAIN ones included */
  uint64_t gso_messages;  /* messages that carried more than one packet as GSO segments */
  uint64_t dropped;       /* packets refused for their own reason (EMSGSIZE, ECONNREFUSED, ...) */
  uint64_t would_block;   /* flushes that stopped on EAGAIN with packets still queued */
  int last_error;         /* errno of the last refused packet, 0 if none */
} ptt_udp_batch_stats;

/* A batch of at most `max_packets` packets (1...1024). NULL when out of memory. */
ptt_udp_batch *ptt_udp_batch_create(size_t max_packets);
void ptt_udp_batch_destroy(ptt_udp_batch *batch);
/* Room for one more packet of up to `length` bytes: the address to write it at, or NULL when the batch holds
 * max_packets packets already (flush first) or memory ran out. Valid until the next call on the batch. */
uint8_t *ptt_udp_batch_reserve(ptt_udp_batch *batch, size_t length);
/* Queues the `length` bytes written at the last reserve() (0 queues nothing) for `remote` (NULL on a connected
 * socket) from `local` (NULL or locallen 0: the kernel picks), with the ECN codepoint `ecn`. */
void ptt_udp_batch_commit(ptt_udp_batch *batch, size_t length, const struct sockaddr *remote, socklen_t remotelen,
                          const struct sockaddr *local, socklen_t locallen, uint32_t ecn);
size_t ptt_udp_batch_count(const ptt_udp_batch *batch);
/* Sends the queued packets in order. gso != 0 lets equal-size packets to one destination share a message
 * (UDP_SEGMENT); if the kernel refuses that, the batch stops using GSO and resends them one by one. Returns 0
 * once the queue is empty, or -EAGAIN when the socket buffer is full (the unsent packets stay queued). A packet
 * the kernel refuses for another reason is dropped alone (counted in stats); the others still go. */
int ptt_udp_batch_flush(ptt_udp_batch *batch, int fd, int gso);
/* The batch's counters; `gso_enabled` says whether it still uses GSO. */
void ptt_udp_batch_get_stats(const ptt_udp_batch *batch, ptt_udp_batch_stats *stats, int *gso_enabled);
/* The address family of socket `fd` (SO_DOMAIN), or 0: what a connected socket's packets, which name no
 * address, are sent in. */
int ptt_socket_family(int fd);
/* Writes the control messages of one UDP send into `control` (`space` bytes, 96 suffice): the ECN codepoint
 * (IP_TOS / IPV6_TCLASS for `family`), the source address when `local` is set, and UDP_SEGMENT when
 * `segment_size` > 0. Returns the bytes used (0: none). Shared by ptt_udp_send and the batch. */
size_t ptt_udp_fill_cmsgs(uint8_t *control, size_t space, int family, const struct sockaddr *local,
                          socklen_t locallen, uint32_t ecn, size_t segment_size);
#endif
