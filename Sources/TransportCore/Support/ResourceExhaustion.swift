import Glibc

/// What to do when errno `code` says a resource ran out; empty for other errors. Appended to the message of the
/// `TransportError` that reports the failed call, so the reader knows it is a limit, not a bug or a bad file.
package func exhaustionHint(_ code: Int32) -> String {
    switch code {
    case EMFILE: return " (this process is out of file descriptors: close connections or raise its limit, ulimit -n)"
    case ENFILE: return " (the system is out of file descriptors: raise fs.file-max or close connections)"
    case ENOMEM, ENOBUFS: return " (the kernel is out of memory for sockets)"
    case ENOSPC: return " (for epoll_ctl: the per-user limit fs.epoll.max_user_watches was reached)"
    default: return ""
    }
}
