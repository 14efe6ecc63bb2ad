/*
 * Several incoming UDP datagrams of one socket read with one recvmmsg call, each with its peer address, the local
 * address it was sent to (IP_PKTINFO / IPV6_PKTINFO) and its ECN codepoint: a busy server reads a burst of
 * acknowledgements for the price of one system call.
 */
#ifndef PTT_UDP_RECV_BATCH_H
#define PTT_UDP_RECV_BATCH_H
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

typedef struct ptt_udp_recv_batch ptt_udp_recv_batch;

/* One received datagram: `data` points into the batch and stays valid until the next receive on it. */
typedef struct ptt_udp_received {
  const uint8_t *data;
  size_t length;
  struct sockaddr_storage remote, local;
  socklen_t remotelen, locallen; /* locallen 0: no packet info (connected socket, or not enabled) */
  uint32_t ecn;
  int truncated; /* longer than the slot: the tail was cut off (the caller drops it) */
} ptt_udp_received;

/* Room for `slots` datagrams (1...256) of up to `slot_size` bytes each. NULL when out of memory or out of range. */
ptt_udp_recv_batch *ptt_udp_recv_batch_create(size_t slots, size_t slot_size);
void ptt_udp_recv_batch_destroy(ptt_udp_recv_batch *batch);
/* Reads up to `max` (<= slots) waiting datagrams without blocking. Returns how many (0 when none is waiting) or
 * -errno for an error with nothing read (e.g. ECONNREFUSED after an ICMP error on this socket). */
int ptt_udp_recv_batch_receive(ptt_udp_recv_batch *batch, int fd, size_t max);
/* The `index`th datagram of the last receive (index < what it returned). */
void ptt_udp_recv_batch_get(const ptt_udp_recv_batch *batch, size_t index, ptt_udp_received *out);
/* Reads the ECN codepoint and the local address from a received message's control data (shared by the single
 * and the batched receive). `local` may be NULL; *locallen stays 0 without packet info. */
void ptt_udp_parse_cmsgs(struct msghdr *msg, struct sockaddr_storage *local, socklen_t *locallen, uint32_t *ecn);
#endif
