/* The kernel's price of a UDP packet, for the benchmark's send floor (KernelSendFloor). */
#ifndef PTT_FLOOR_H
#define PTT_FLOOR_H
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* Benchmark floor: sends `total` packets of `packet_size` zero bytes round-robin to `count` destinations with
 * sendmmsg in batches of `batch_size` (at most 256), blocking; *cpu_ns gets the calling thread's CPU time
 * (CLOCK_THREAD_CPUTIME_ID) for the loop. Returns the packets sent (fewer after a hard error). */
size_t ptt_udp_floor_send(int fd, const struct sockaddr_storage *destinations, socklen_t destination_length,
                          size_t count, size_t packet_size, size_t batch_size, size_t total, uint64_t *cpu_ns);
#endif
