// TransportIO: the epoll event loop (eventfd wake-ups, timerfd timers) that is a SerialExecutor, and the UDP and
// TCP sockets the transport runs on. It does I/O and scheduling only; it never parses or decides protocol state.
