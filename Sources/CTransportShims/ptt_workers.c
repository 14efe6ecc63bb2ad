#define _GNU_SOURCE
#include "ptt_workers.h"

#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <unistd.h>

extern char **environ;

int ptt_spawn_clean(pid_t *pid, const char *path, const posix_spawn_file_actions_t *actions, char *const argv[],
                    char *const envp[]) {
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attributes, &all);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  int rv = posix_spawn(pid, path, actions, &attributes, argv, envp != NULL ? envp : environ);
  posix_spawnattr_destroy(&attributes);
  return rv;
}

int ptt_spawn_worker(const char *path, char *const argv[], const int *fds, int count, pid_t *pid) {
  posix_spawn_file_actions_t actions;
  int rv = posix_spawn_file_actions_init(&actions);
  if (rv != 0) return rv;
  for (int i = 0; i < count && rv == 0; i++) rv = posix_spawn_file_actions_adddup2(&actions, fds[i], 3 + i);
  if (rv == 0) rv = posix_spawn_file_actions_addclosefrom_np(&actions, 3 + count);
  if (rv != 0) {
    posix_spawn_file_actions_destroy(&actions);
    return rv;
  }
  rv = ptt_spawn_clean(pid, path, &actions, argv, NULL);
  posix_spawn_file_actions_destroy(&actions);
  return rv;
}

int ptt_die_with_parent(pid_t parent) {
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) return -1;
  return getppid() == parent ? 0 : -1;
}
