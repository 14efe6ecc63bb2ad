#define _GNU_SOURCE
#include "ptt_spawn.h"
#include "ptt_workers.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

static int add_descriptor(posix_spawn_file_actions_t *actions, int fd, int target, int flags) {
  if (fd < 0) return posix_spawn_file_actions_addopen(actions, target, "/dev/null", flags, 0);
  return posix_spawn_file_actions_adddup2(actions, fd, target);
}

int ptt_spawn(const char *path, char *const argv[], char *const envp[], const char *directory, int stdin_fd,
              int stdout_fd, int stderr_fd, pid_t *pid) {
  posix_spawn_file_actions_t actions;
  int rv = posix_spawn_file_actions_init(&actions);
  if (rv != 0) return rv;
  if ((rv = add_descriptor(&actions, stdin_fd, 0, O_RDONLY)) != 0 ||
      (rv = add_descriptor(&actions, stdout_fd, 1, O_WRONLY)) != 0 ||
      (rv = add_descriptor(&actions, stderr_fd, 2, O_WRONLY)) != 0 ||
      /* Nothing else of this process's: sockets and TUN devices opened without CLOEXEC stay out of the child. */
      (rv = posix_spawn_file_actions_addclosefrom_np(&actions, 3)) != 0 ||
      (directory != NULL && (rv = posix_spawn_file_actions_addchdir_np(&actions, directory)) != 0)) {
    posix_spawn_file_actions_destroy(&actions);
    return rv;
  }
  rv = ptt_spawn_clean(pid, path, &actions, argv, envp);
  posix_spawn_file_actions_destroy(&actions);
  return rv;
}

int ptt_run_command(const char *path, char *const argv[], char *out, size_t capacity, size_t *length) {
  *length = 0;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return -errno;
  pid_t pid;
  int rv = ptt_spawn(path, argv, NULL, NULL, -1, fds[1], fds[1], &pid);
  close(fds[1]);
  if (rv != 0) {
    close(fds[0]);
    return -rv;
  }
  size_t kept = 0;
  char dropped[4096];
  for (;;) {
    char *into = kept < capacity ? out + kept : dropped;
    size_t room = kept < capacity ? capacity - kept : sizeof(dropped);
    ssize_t n = read(fds[0], into, room);
    if (n > 0) {
      if (kept < capacity) kept += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;  /* end of output (or a read error: the child is still waited for) */
  }
  close(fds[0]);
  *length = kept;
  int status;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -errno;
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -ECHILD;
}
