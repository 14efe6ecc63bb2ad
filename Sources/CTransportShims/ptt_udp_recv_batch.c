#define _GNU_SOURCE
#include "ptt_udp_recv_batch.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <stdlib.h>
#include <string.h>

enum { CONTROL_SPACE = 256, MAX_SLOTS = 256 };

struct ptt_udp_recv_batch {
  size_t slots, slot_size;
  uint8_t *arena;
  struct mmsghdr *messages;
  struct iovec *iovecs;
  struct sockaddr_storage *remotes;
  uint8_t (*controls)[CONTROL_SPACE];
};

ptt_udp_recv_batch *ptt_udp_recv_batch_create(size_t slots, size_t slot_size) {
  if (slots == 0 || slots > MAX_SLOTS || slot_size == 0) return NULL;
  ptt_udp_recv_batch *batch = calloc(1, sizeof(*batch));
  if (!batch) return NULL;
  batch->slots = slots;
  batch->slot_size = slot_size;
  batch->arena = malloc(slots * slot_size);
  batch->messages = calloc(slots, sizeof(*batch->messages));
  batch->iovecs = calloc(slots, sizeof(*batch->iovecs));
  batch->remotes = calloc(slots, sizeof(*batch->remotes));
  batch->controls = calloc(slots, CONTROL_SPACE);
  if (!batch->arena || !batch->messages || !batch->iovecs || !batch->remotes || !batch->controls) {
    ptt_udp_recv_batch_destroy(batch);
    return NULL;
  }
  return batch;
}

void ptt_udp_recv_batch_destroy(ptt_udp_recv_batch *batch) {
  if (!batch) return;
  free(batch->arena);
  free(batch->messages);
  free(batch->iovecs);
  free(batch->remotes);
  free(batch->controls);
  free(batch);
}

int ptt_udp_recv_batch_receive(ptt_udp_recv_batch *batch, int fd, size_t max) {
  size_t n = max < batch->slots ? max : batch->slots;
  if (n == 0) return 0;
  for (size_t i = 0; i < n; i++) {
    batch->iovecs[i].iov_base = batch->arena + i * batch->slot_size;
    batch->iovecs[i].iov_len = batch->slot_size;
    struct msghdr *msg = &batch->messages[i].msg_hdr;
    memset(msg, 0, sizeof(*msg));
    msg->msg_name = &batch->remotes[i];
    msg->msg_namelen = sizeof(batch->remotes[i]);
    msg->msg_iov = &batch->iovecs[i];
    msg->msg_iovlen = 1;
    msg->msg_control = batch->controls[i];
    msg->msg_controllen = CONTROL_SPACE;
    batch->messages[i].msg_len = 0;
  }
  int received;
  do {
    received = recvmmsg(fd, batch->messages, (unsigned int)n, MSG_DONTWAIT, NULL);
  } while (received < 0 && errno == EINTR);
  if (received < 0) return (errno == EAGAIN || errno == EWOULDBLOCK) ? 0 : -errno;
  return received;
}

void ptt_udp_recv_batch_get(const ptt_udp_recv_batch *batch, size_t index, ptt_udp_received *out) {
  struct mmsghdr *message = &batch->messages[index];
  out->data = batch->arena + index * batch->slot_size;
  out->length = message->msg_len;
  memcpy(&out->remote, &batch->remotes[index], sizeof(out->remote));
  out->remotelen = message->msg_hdr.msg_namelen;
  out->truncated = (message->msg_hdr.msg_flags & MSG_TRUNC) != 0;
  ptt_udp_parse_cmsgs(&message->msg_hdr, &out->local, &out->locallen, &out->ecn);
}

void ptt_udp_parse_cmsgs(struct msghdr *msg, struct sockaddr_storage *local, socklen_t *locallen, uint32_t *ecn) {
  *ecn = 0;
  *locallen = 0;
  for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
    if (c->cmsg_level == IPPROTO_IP && (c->cmsg_type == IP_TOS || c->cmsg_type == IP_RECVTOS)) {
      *ecn = (*(uint8_t *)CMSG_DATA(c)) & 0x3;
    } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS) {
      int tclass;
      memcpy(&tclass, CMSG_DATA(c), sizeof(tclass));
      *ecn = (uint32_t)tclass & 0x3;
    } else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO && local) {
      struct in_pktinfo pi;
      memcpy(&pi, CMSG_DATA(c), sizeof(pi));
      struct sockaddr_in *sin = (struct sockaddr_in *)local;
      memset(sin, 0, sizeof(*sin));
      sin->sin_family = AF_INET;
      sin->sin_addr = pi.ipi_addr;
      *locallen = sizeof(*sin);
    } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO && local) {
      struct in6_pktinfo pi;
      memcpy(&pi, CMSG_DATA(c), sizeof(pi));
      struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)local;
      memset(sin6, 0, sizeof(*sin6));
      sin6->sin6_family = AF_INET6;
      sin6->sin6_addr = pi.ipi6_addr;
      *locallen = sizeof(*sin6);
    }
  }
}
