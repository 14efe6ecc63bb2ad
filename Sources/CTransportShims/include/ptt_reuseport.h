/*
 * SO_REUSEPORT groups: classic-BPF steering of a group's datagrams and the CPU count the process may use.
 */
#ifndef PTT_REUSEPORT_H
#define PTT_REUSEPORT_H

#include <stdint.h>

/* One classic-BPF instruction; the same layout as the kernel's `struct sock_filter`. */
typedef struct ptt_bpf_insn {
  uint16_t code;
  uint8_t jt;
  uint8_t jf;
  uint32_t k;
} ptt_bpf_insn;

/* Attaches `count` instructions as the SO_REUSEPORT group's steering program (SO_ATTACH_REUSEPORT_CBPF) through
 * `fd`, a bound member of the group. Returns 0, or -errno (the kernel refused the program or the option). */
int ptt_attach_reuseport_cbpf(int fd, const ptt_bpf_insn *insns, uint16_t count);

/* Sets SO_REUSEPORT on `fd` (before bind). Returns 0 or -errno. */
int ptt_enable_reuseport(int fd);

/* The number of CPUs this process may run on (sched_getaffinity), at least 1. */
int ptt_available_cpus(void);

#endif
