/* Network-namespace and TUN helpers for the benchmark's emulated paths (root only). */
#ifndef PTT_NETEMU_H
#define PTT_NETEMU_H
#include <stddef.h>

/* Moves the calling thread (only it: setns acts per thread) into the network namespace at `path`
 * (/var/run/netns/NAME). Returns a descriptor of the namespace it was in (pass it to ptt_netns_restore), or
 * -errno. Threads created meanwhile, and sockets opened meanwhile, stay in that namespace. */
int ptt_netns_enter(const char *path);
/* Benchmark isolation: runs the calling thread on CPU `cpu` only. 0 or -errno. */
int ptt_pin_current_thread(int cpu);
/* Moves the calling thread back to the namespace `saved` refers to and closes it. Returns 0 or -errno. */
int ptt_netns_restore(int saved);
/* Opens a TUN device (IFF_TUN | IFF_NO_PI, non-blocking, close-on-exec) in the calling thread's namespace; the
 * kernel names it (tun0, tun1, ...). Writes the interface name to `name` (IFNAMSIZ = 16 bytes suffice; truncated
 * and NUL-terminated to `name_length`; `name` may be NULL). Returns the descriptor or -errno. The device lives
 * in the namespace it was created in, and disappears when the descriptor is closed. */
int ptt_tun_open(char *name, size_t name_length);
#endif
