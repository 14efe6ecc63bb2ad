import Glibc

/// Blocking waits on the project's non-blocking sockets.
enum Poll {
    /// Waits up to `milliseconds` for any of `fds` to become readable; returns the readable ones.
    static func readable(_ fds: [Int32], milliseconds: Int32) -> [Int32] {
        var entries = fds.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        let ready = poll(&entries, nfds_t(entries.count), milliseconds)
        guard ready > 0 else { return [] }
        return entries.filter { $0.revents != 0 }.map(\.fd)
    }

    /// Waits up to `milliseconds` for `fd` to become writable.
    static func writable(_ fd: Int32, milliseconds: Int32) -> Bool {
        var entry = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        return poll(&entry, 1, milliseconds) > 0
    }
}
