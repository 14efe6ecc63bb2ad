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
/* For an event loop started by a thread inside ptt_netns_enter: new descriptors of the namespace that thread entered
 * and of the one it left (both -1 when it is in none). 0 or -errno. */
int ptt_netns_inherit(int *entered, int *left);
/* On the event loop's own thread: moves it back to `left` (closed) and makes the sockets it opens from now on
 * (ptt_socket) belong to `entered`, which it keeps. So the loop's thread, and every thread it starts (e.g. the
 * concurrency runtime's workers), stay out of the emulated namespace while its sockets are in it. 0 or -errno. */
int ptt_netns_adopt_for_sockets(int entered, int left);
/* socket(2), in the namespace ptt_netns_adopt_for_sockets gave the calling thread, if any. -1 with errno set on
 * failure. */
int ptt_socket(int domain, int type, int protocol);
/* Opens a TUN device (IFF_TUN | IFF_NO_PI, non-blocking, close-on-exec) in the calling thread's namespace; the
 * kernel names it (tun0, tun1, ...). Writes the interface name to `name` (IFNAMSIZ = 16 bytes suffice; truncated
 * and NUL-terminated to `name_length`; `name` may be NULL). Returns the descriptor or -errno. The device lives
 * in the namespace it was created in, and disappears when the descriptor is closed. */
int ptt_tun_open(char *name, size_t name_length);
#endif
