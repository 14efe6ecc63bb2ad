/* Network-namespace and TUN helpers for the benchmark's emulated paths: ioctl is variadic and setns needs a
 * per-thread saved descriptor, so both live here. See ptt_netemu.h. */
#define _GNU_SOURCE
#include "ptt_netemu.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <sched.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

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
  close(target);
  if (rv != 0) {
    close(saved);
    return -err;
  }
  return saved;
}

int ptt_netns_restore(int saved) {
  int rv = setns(saved, CLONE_NEWNET);
  int err = errno;
  close(saved);
  return rv == 0 ? 0 : -err;
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
