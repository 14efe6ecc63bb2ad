// ChildProcesses: the one way this package's tests and benchmark run other programs — a program run to
// completion with a timeout, a server started until it says `listening on HOST:PORT` and stopped with SIGTERM, and a
// packet capture (dumpcap).
// Every program is a `SpawnedProgram` (posix_spawn and waitpid, not Foundation's Process). Every blocking wait runs
// on a thread of its own, never on the cooperative pool, and every wait is bounded.
