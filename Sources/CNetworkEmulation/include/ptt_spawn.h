/*
 * Starting other programs without Foundation's Process, whose run() crashed a test process now and then (a fault
 * inside Process.run, a try! on EINTR inside FileHandle).
 */
#ifndef PTT_SPAWN_H
#define PTT_SPAWN_H
#include <stddef.h>
#include <sys/types.h>

/* Starts `path` with `argv` (NULL-terminated, argv[0] the program's name) and `envp` (NULL: this process's
 * environment), in `directory` (NULL: this process's). `stdin_fd`, `stdout_fd` and `stderr_fd` become its 0, 1 and 2
 * (-1: /dev/null); it inherits no other descriptor. It starts with every signal at its default action and none
 * blocked, whatever the calling thread blocks (a cooperative-pool thread blocks SIGTERM). Returns 0 and sets
 * `*pid`, or an errno value. The caller waits for it (waitpid). */
int ptt_spawn(const char *path, char *const argv[], char *const envp[], const char *directory, int stdin_fd,
              int stdout_fd, int stderr_fd, pid_t *pid);

/* Runs `path` with `argv` and this process's environment to completion, stdin from /dev/null, stdout and stderr
 * together into `out` (at most `capacity` bytes kept, the rest read and dropped; `*length` = bytes kept). Returns
 * the exit status (0-255), 128 + the signal number when a signal ended it, or -errno when it could not be started
 * or waited for. */
int ptt_run_command(const char *path, char *const argv[], char *out, size_t capacity, size_t *length);

#endif
