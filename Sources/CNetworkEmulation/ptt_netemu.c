/* Network-namespace and TUN helpers for the benchmark's emulated paths: ioctl is variadic and setns needs a
 * per-thread saved descriptor, so both live here. See ptt_netemu.h. */
#define _GNU_SOURCE
#include "ptt_netemu.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* Per thread, while it is inside a namespace through ptt_netns_enter: that namespace and the one it left, for an
 * event loop started meanwhile (ptt_netns_inherit). */
static __thread int entered_namespace = -1;
static __thread int left_namespace = -1;
/* Per thread: the namespace the sockets this thread opens belong to (an event loop started inside one), or -1. */
static __thread int socket_namespace = -1;

int ptt_netns_enter(const char *path) {
  int saved = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (saved < 0) return -errno;
  int target = open(path, O_RDONLY | O_CLOEXEC);
  if (target < 0) {
    int err = errno;
    close(saved);
    return -err;
  }
  int rv = setns(target, CLONE_NEWNET);
  int err = errno;
  if (rv != 0) {
    close(target);
    close(saved);
    return -err;
  }
  if (entered_namespace >= 0) close(entered_namespace);
  if (left_namespace >= 0) close(left_namespace);
  entered_namespace = target;
  left_namespace = fcntl(saved, F_DUPFD_CLOEXEC, 0);
  return saved;
}

int ptt_netns_restore(int saved) {
  int rv = setns(saved, CLONE_NEWNET);
  int err = errno;
  close(saved);
  if (entered_namespace >= 0) close(entered_namespace);
  if (left_namespace >= 0) close(left_namespace);
  entered_namespace = left_namespace = -1;
  return rv == 0 ? 0 : -err;
}

int ptt_netns_inherit(int *entered, int *left) {
  *entered = *left = -1;
  if (entered_namespace < 0 || left_namespace < 0) return 0;
  *entered = fcntl(entered_namespace, F_DUPFD_CLOEXEC, 0);
  *left = fcntl(left_namespace, F_DUPFD_CLOEXEC, 0);
  if (*entered < 0 || *left < 0) {
    int err = errno;
    if (*entered >= 0) close(*entered);
    if (*left >= 0) close(*left);
    *entered = *left = -1;
    return -err;
  }
  return 0;
}

int ptt_netns_adopt_for_sockets(int entered, int left) {
  int rv = setns(left, CLONE_NEWNET);
  int err = errno;
  close(left);
  if (rv != 0) {
    close(entered);
    return -err;
  }
  socket_namespace = entered;
  return 0;
}

int ptt_socket(int domain, int type, int protocol) {
  if (socket_namespace < 0) return socket(domain, type, protocol);
  int back = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (back < 0) return -1;
  if (setns(socket_namespace, CLONE_NEWNET) != 0) {
    int err = errno;
    close(back);
    errno = err;
    return -1;
  }
  int fd = socket(domain, type, protocol);
  int err = errno;
  int rv = setns(back, CLONE_NEWNET);
  close(back);
  if (rv != 0) abort(); /* the thread would stay in the emulated namespace: nothing sensible can run on it */
  errno = err;
  return fd;
}

int ptt_tun_open(char *name, size_t name_length) {
  int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return -errno;
  struct ifreq request;
  memset(&request, 0, sizeof(request));
  request.ifr_flags = IFF_TUN | IFF_NO_PI;
  if (ioctl(fd, TUNSETIFF, &request) != 0) {
    int err = errno;
    close(fd);
    return -err;
  }
  if (name != NULL && name_length > 0) {
    strncpy(name, request.ifr_name, name_length - 1);
    name[name_length - 1] = 0;
  }
  return fd;
}

int ptt_pin_current_thread(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(0, sizeof(set), &set) == 0 ? 0 : -errno;
}
