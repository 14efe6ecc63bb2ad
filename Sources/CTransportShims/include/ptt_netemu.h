/* Network-namespace and TUN helpers for the benchmark's emulated paths (root only). */
#ifndef PTT_NETEMU_H
#define PTT_NETEMU_H
#include <stddef.h>

/* Moves the calling thread into the network namespace at `path` (/var/run/netns/NAME). Returns a descriptor of
 * the namespace it was in (pass it to ptt_netns_restore), or -errno. Threads created meanwhile stay there. */
int ptt_netns_enter(const char *path);
/* Moves the calling thread back to the namespace `saved` refers to and closes it. Returns 0 or -errno. */
int ptt_netns_restore(int saved);
/* Opens a TUN device (IFF_TUN | IFF_NO_PI, non-blocking) in the calling thread's namespace. Writes the
 * interface name to `name` (at least 16 bytes). Returns the descriptor or -errno. */
int ptt_tun_open(char *name, size_t name_length);
#endif
