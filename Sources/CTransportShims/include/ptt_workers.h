#ifndef PTT_WORKERS_H
#define PTT_WORKERS_H

#include <spawn.h>
#include <sys/types.h>

/* posix_spawn with every signal at its default and none blocked in the child (whatever this process ignores or
 * blocks), `envp` NULL meaning this process's environment. Returns 0 or an errno value. */
int ptt_spawn_clean(pid_t *pid, const char *path, const posix_spawn_file_actions_t *actions, char *const argv[],
                    char *const envp[]);

/* Starts `path` with `argv` (and this process's environment) as a relay worker: descriptors `fds[0..count)` become
 * 3, 4, ... in the child (each must be >= 3 + count here, so no move overwrites another), every other descriptor
 * from 3 on is closed, stdin/stdout/stderr are shared, every signal is at its default and none is blocked.
 * Returns 0 and the child's pid, or an errno value. */
int ptt_spawn_worker(const char *path, char *const argv[], const int *fds, int count, pid_t *pid);

/* In a worker: asks the kernel for SIGKILL when the parent dies, and reports whether the parent is still `parent`
 * (0: it is; -1: it is already gone, so the worker should exit). */
int ptt_die_with_parent(pid_t parent);

#endif
