#define _GNU_SOURCE
#include "ptt_reuseport.h"

#include <errno.h>
#include <linux/filter.h>
#include <sched.h>
#include <sys/socket.h>

#ifndef SO_ATTACH_REUSEPORT_CBPF
#define SO_ATTACH_REUSEPORT_CBPF 51
#endif

_Static_assert(sizeof(ptt_bpf_insn) == sizeof(struct sock_filter), "ptt_bpf_insn must match sock_filter");

int ptt_attach_reuseport_cbpf(int fd, const ptt_bpf_insn *insns, uint16_t count) {
  struct sock_fprog program = {.len = count, .filter = (struct sock_filter *)insns};
  if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &program, sizeof(program)) != 0) return -errno;
  return 0;
}

int ptt_enable_reuseport(int fd) {
  int on = 1;
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof(on)) != 0) return -errno;
  return 0;
}

int ptt_available_cpus(void) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  int count = CPU_COUNT(&set);
  return count > 0 ? count : 1;
}
