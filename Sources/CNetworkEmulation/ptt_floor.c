/* The benchmark's sendmmsg floor loop. See ptt_floor.h. */
#define _GNU_SOURCE
#include "ptt_floor.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

size_t ptt_udp_floor_send(int fd, const struct sockaddr_storage *destinations, socklen_t destination_length,
                          size_t count, size_t packet_size, size_t batch_size, size_t total, uint64_t *cpu_ns) {
  enum { MAX_BATCH = 256 };
  if (count == 0 || batch_size == 0 || batch_size > MAX_BATCH || packet_size > 65507) return 0;
  uint8_t *payload = calloc(1, packet_size ? packet_size : 1);
  if (!payload) return 0;
  struct mmsghdr messages[MAX_BATCH];
  struct iovec iov = {.iov_base = payload, .iov_len = packet_size};
  struct timespec start, end;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &start);
  size_t sent = 0, next = 0;
  while (sent < total) {
    size_t n = total - sent < batch_size ? total - sent : batch_size;
    for (size_t i = 0; i < n; i++) {
      memset(&messages[i], 0, sizeof(messages[i]));
      messages[i].msg_hdr.msg_iov = &iov;
      messages[i].msg_hdr.msg_iovlen = 1;
      messages[i].msg_hdr.msg_name = (void *)&destinations[next];
      messages[i].msg_hdr.msg_namelen = destination_length;
      next = next + 1 == count ? 0 : next + 1;
    }
    int r = sendmmsg(fd, messages, (unsigned int)n, 0);
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == ENOBUFS) continue;
      break;
    }
    sent += (size_t)r;
  }
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &end);
  *cpu_ns = (uint64_t)(end.tv_sec - start.tv_sec) * 1000000000ull + (uint64_t)end.tv_nsec - (uint64_t)start.tv_nsec;
  free(payload);
  return sent;
}
