/*
 * Running a short helper program (ip, tc) to completion without Foundation's Process, whose run() crashed a test
 * process now and then (a fault inside Process.run, a try! on EINTR inside FileHandle).
 */
#ifndef PTT_SPAWN_H
#define PTT_SPAWN_H
#include <stddef.h>

/* Runs `path` with `argv` (NULL-terminated, argv[0] the program's name) and this process's environment, stdin
 * from /dev/null, stdout and stderr together into `out` (at most `capacity` bytes kept, the rest read and
 * dropped; `*length` = bytes kept). Returns the exit status (0-255), 128 + the signal number when a signal ended
 * it, or -errno when it could not be started or waited for. The child starts with every signal at its default
 * action and none blocked, and inherits no descriptor but 0-2. */
int ptt_run_command(const char *path, char *const argv[], char *out, size_t capacity, size_t *length);

#endif
