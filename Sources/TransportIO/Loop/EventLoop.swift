internal import CTransportShims
import Glibc
import TransportCore

/// One thread running epoll, with an eventfd for cross-thread wake-ups and a timerfd for deadlines. Every
/// ngtcp2 and GnuTLS object of an endpoint lives on its loop; other threads reach them only through `execute`.
///
/// The loop is a `SerialExecutor`, so an actor can pin itself to it with `unownedExecutor`, and a `TaskExecutor`, so
/// a task the transport itself starts can prefer it (`executorPreference:`) and resume without a thread hop. Such a
/// task must never block: it would stall every connection of the loop.
///
/// - Important: `register`, `unregister`, `schedule`, `cancelTimer` and `deferUntilIdle` must be called on the
///   loop's thread (checked with a precondition). `execute` and `submit` are safe from any thread.
package final class EventLoop: SerialExecutor, TaskExecutor, @unchecked Sendable {
    // @unchecked Sendable invariant: `handlers`, `timers`, `deferred`, the flushers, `running`, `queuedFromLoop` and
    // the scratch buffer are touched only on the loop thread; `jobs` is guarded by its lock; the file descriptors are
    // immutable.
    private let epollFD: Int32
    private let wakeFD: Int32
    private let timerFD: Int32
    private let jobs = Locked<(queue: [@Sendable () -> Void], wakePending: Bool, stopped: Bool)>(([], false, false))
    private var handlers: [Int32: (UInt32) -> Void] = [:]
    private var timers = TimerQueue()
    private var armedDeadline: UInt64 = .max
    private var deferred: [Deferred] = []
    /// The batch `runDeferred` runs (swapped with `deferred`: no array allocated per batch).
    private var deferredNow: [Deferred] = []
    private var turnEndFlushers: [any EndOfTurnFlushing] = []
    private var flushingNow: [any EndOfTurnFlushing] = []
    /// Work that waits behind the turn's output (`afterOutput`), and the batch running now (swapped, like
    /// `deferred`).
    private var behindOutput: [any AfterOutputWork] = []
    private var behindOutputNow: [any AfterOutputWork] = []
    private var running = true
    /// A job was queued from the loop thread itself: the next `epoll_wait` must not block (no eventfd write needed).
    private var queuedFromLoop = false
    private var nextTimerID = 0
    private let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 65536, alignment: 16)
    private var scratchInUse = false
    private let threadID = Locked<pthread_t?>(nil)
    private let cpuClock = Locked<clockid_t?>(nil)
    private let finished = Locked<Bool>(false)
    package let name: String
    /// What an installed `LoopThreadStart` preparation gave this loop's thread to run first (nil: nothing).
    private let threadStart: LoopThreadStart?
    /// epoll bits for "readable" and "writable", for callers that do not import the C headers.
    package static let readable = EPOLLIN.rawValue
    package static let writable = EPOLLOUT.rawValue

    /// Starts the loop's thread.
    package init(name: String = "ptt-loop") throws(TransportError) {
        self.name = name
        let threadStart = LoopThreadStart.prepare()
        self.threadStart = threadStart
        do {
            (epollFD, wakeFD, timerFD) = try Self.makeDescriptors()
        } catch {
            threadStart?.ifNotStarted()
            throw error
        }
        let box = Unmanaged.passRetained(self)
        var thread = pthread_t()
        // Retained for the thread's life; released when `run` returns.
        let rv = pthread_create(
            &thread, nil,
            { context in
                let loop = Unmanaged<EventLoop>.fromOpaque(context!).takeRetainedValue()
                loop.run()
                return nil
            }, box.toOpaque())
        guard rv == 0 else {
            box.release()  // `self` is fully initialized: the throw runs `deinit`, which closes the descriptors
            threadStart?.ifNotStarted()
            throw TransportError(
                .systemCallFailed,
                "cannot start the event loop thread: pthread_create failed: "
                    + "\(errnoDescription(rv))" + (rv == EAGAIN ? " (the process or user is out of threads)" : ""),
                libraryCode: Int(rv))
        }
        threadID.withLock { $0 = thread }
    }

    /// The epoll, eventfd and timerfd descriptors, the latter two watched. On failure (EMFILE when the process is
    /// out of descriptors, ENOMEM) the ones already made are closed and the error names the call that failed.
    ///
    /// A loop whose descriptors land in the `DescriptorHeadroom` reserve is refused the same way (EMFILE): it would
    /// leave the process too few descriptors for the rest of its work, and the concurrency runtime (Dispatch) traps
    /// when it cannot open one (its worker monitor reads /proc every second), so taking the last descriptors would
    /// turn "out of descriptors" into a crash of the whole process.
    private static func makeDescriptors() throws(TransportError) -> (epoll: Int32, wake: Int32, timer: Int32) {
        var made: [Int32] = []
        do throws(TransportError) {
            let epoll = try systemCall("epoll_create1") { epoll_create1(Int32(EPOLL_CLOEXEC)) }
            made.append(epoll)
            let wake = try systemCall("eventfd") { eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC)) }
            made.append(wake)
            let timer = try systemCall("timerfd_create") {
                timerfd_create(CLOCK_MONOTONIC, Int32(TFD_NONBLOCK | TFD_CLOEXEC))
            }
            made.append(timer)
            if let last = made.max(), DescriptorHeadroom.isInReserve(last) {
                let limit = DescriptorHeadroom.softLimit ?? 0
                throw TransportError(
                    .systemCallFailed,
                    "fewer than \(DescriptorHeadroom.reserve(forLimit: limit)) of the \(limit) descriptors would be "
                        + "left, kept for the rest of the process" + exhaustionHint(EMFILE),
                    libraryCode: Int(EMFILE))
            }
            for fd in [wake, timer] {
                var event = epoll_event(events: EPOLLIN.rawValue, data: epoll_data_t(fd: fd))
                try systemCall("epoll_ctl") { epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event) }
            }
            return (epoll, wake, timer)
        } catch {
            for fd in made { close(fd) }
            throw TransportError(
                error.code, "cannot start an event loop: \(error.message)",
                libraryCode: error.libraryCode)
        }
    }

    deinit {
        scratch.deallocate()
        close(epollFD)
        close(wakeFD)
        close(timerFD)
    }

    /// Whether the caller runs on this loop's thread. Lock-free (a thread-specific value the loop's thread set):
    /// every loop-thread precondition on the packet path asks it.
    package var inEventLoop: Bool {
        // Unmanaged invariant: only compared, never dereferenced; the loop thread stores its own loop's address.
        EventLoop.currentLoopKey.map { pthread_getspecific($0) == Unmanaged.passUnretained(self).toOpaque() } ?? false
    }

    /// The thread-specific key under which each loop thread stores its loop's address (nil: the key could not be
    /// made, so no thread is a loop thread and preconditions fail loudly).
    private static let currentLoopKey: pthread_key_t? = {
        var key = pthread_key_t()
        return pthread_key_create(&key, nil) == 0 ? key : nil
    }()

    /// Runs `job` on the loop thread, soon. Safe from any thread. Once the loop has stopped, `job` never runs.
    package func execute(_ job: @escaping @Sendable () -> Void) {
        enqueueJob(job)
    }

    /// Runs `job` on the loop thread, soon; once the loop has stopped, calls `stopped` at once instead, on the
    /// caller's thread. For a job that resumes a continuation: `stopped` resumes it, so no caller waits forever.
    package func execute(_ job: @escaping @Sendable () -> Void, orIfStopped stopped: () -> Void) {
        if !enqueueJob(job) { stopped() }
    }

    /// Runs `body` on the loop and returns its result to the awaiting caller.
    ///
    /// - Throws: what `body` throws, or `cancelled` when the loop has stopped (so a caller never waits forever).
    package func submit<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            let accepted = enqueueJob { continuation.resume(with: Result { try body() }) }
            if !accepted {
                continuation.resume(throwing: TransportError(.cancelled, "the event loop \(name) has stopped"))
            }
        }
    }

    /// Queues `job`; false (and `job` is dropped) once the loop has stopped. From another thread the first job after
    /// a turn wakes the loop through the eventfd; from the loop thread (a task on this executor resumed by the
    /// loop's own work) no system call is needed: the loop polls instead of sleeping before its next turn.
    @discardableResult
    private func enqueueJob(_ job: @escaping @Sendable () -> Void) -> Bool {
        let onLoop = inEventLoop
        let wake = jobs.withLock { state -> Bool? in
            if state.stopped { return nil }
            state.queue.append(job)
            if state.wakePending { return false }
            state.wakePending = true
            return !onLoop
        }
        guard let wake else { return false }
        if onLoop { queuedFromLoop = true }
        if wake {
            var one: UInt64 = 1
            _ = write(wakeFD, &one, 8)
        }
        return true
    }

    // MARK: SerialExecutor, TaskExecutor

    package func enqueue(_ job: consuming ExecutorJob) {
        let unownedJob = UnownedJob(job)
        // Both roles at once: an actor pinned to the loop is isolated here, and a task that prefers the loop keeps
        // it as its task executor (its next resumption comes back here).
        let serial = asUnownedSerialExecutor()
        let task = asUnownedTaskExecutor()
        enqueueJob { unownedJob.runSynchronously(isolatedTo: serial, taskExecutor: task) }
    }

    package func asUnownedSerialExecutor() -> UnownedSerialExecutor { UnownedSerialExecutor(ordinary: self) }

    package func checkIsolated() {
        precondition(inEventLoop, "not on event loop \(name)")
    }

    // MARK: Loop-thread API

    /// Watches `fd` for `events` (EPOLLIN/EPOLLOUT bits); `handler` gets the ready bits.
    package func register(fd: Int32, events: UInt32, handler: @escaping (UInt32) -> Void) throws(TransportError) {
        precondition(inEventLoop)
        var event = epoll_event(events: events, data: epoll_data_t(fd: fd))
        try systemCall("epoll_ctl(ADD)") { epoll_ctl(epollFD, EPOLL_CTL_ADD, fd, &event) }
        handlers[fd] = handler
    }

    /// Changes the events watched on a registered descriptor.
    package func modify(fd: Int32, events: UInt32) {
        precondition(inEventLoop)
        var event = epoll_event(events: events, data: epoll_data_t(fd: fd))
        _ = epoll_ctl(epollFD, EPOLL_CTL_MOD, fd, &event)
    }

    /// Stops watching `fd` (call before closing it).
    package func unregister(fd: Int32) {
        precondition(inEventLoop)
        guard handlers.removeValue(forKey: fd) != nil else { return }
        _ = epoll_ctl(epollFD, EPOLL_CTL_DEL, fd, nil)
    }

    /// Loop thread: runs `body` with a 64 KiB buffer for reading or writing packets, shared by every connection of
    /// this loop (one per connection would cost 64 KiB of resident memory each). The contents do not survive the
    /// call. A nested call gets a temporary buffer of its own.
    package func withScratchBuffer<T>(_ body: (UnsafeMutableRawBufferPointer) -> T) -> T {
        precondition(inEventLoop)
        guard !scratchInUse else {
            let temporary = UnsafeMutableRawBufferPointer.allocate(byteCount: scratch.count, alignment: 16)
            defer { temporary.deallocate() }
            return body(temporary)
        }
        scratchInUse = true
        defer { scratchInUse = false }
        return body(scratch)
    }

    /// A new timer identity for `schedule`.
    package func makeTimerID() -> Int {
        precondition(inEventLoop)
        nextTimerID += 1
        return nextTimerID
    }

    /// Fires `action` on the loop at `deadline` (MonotonicClock), replacing the timer's previous deadline.
    package func schedule(timer id: Int, at deadline: UInt64, _ action: @escaping () -> Void) {
        precondition(inEventLoop)
        timers.schedule(id: id, at: deadline, action)
    }

    /// Installs what timer `id` runs when armed with `arm(timer:at:)`, until `cancelTimer` (which forgets it).
    /// For a timer re-armed on every packet: no closure per deadline.
    package func setTimerHandler(_ id: Int, _ handler: @escaping () -> Void) {
        precondition(inEventLoop)
        timers.setHandler(id: id, handler)
    }

    /// Fires timer `id`'s installed handler at `deadline` (MonotonicClock), replacing its previous deadline.
    package func arm(timer id: Int, at deadline: UInt64) {
        precondition(inEventLoop)
        timers.arm(id: id, at: deadline)
    }

    /// Disarms timer `id`, keeping its installed handler for the next `arm`.
    package func disarm(timer id: Int) {
        precondition(inEventLoop)
        timers.disarm(id: id)
    }

    /// Disarms timer `id` and forgets its action and installed handler.
    package func cancelTimer(_ id: Int) {
        precondition(inEventLoop)
        timers.cancel(id: id)
    }

    /// Runs `action` once the current batch of events and jobs is handled: lets many inputs share one flush.
    package func deferUntilIdle(_ action: @escaping () -> Void) {
        precondition(inEventLoop)
        deferred.append(.action(action))
    }

    /// Calls `object.runWhenIdle()` where `deferUntilIdle` would run an action, in the same order: for work
    /// deferred per connection per turn (a relay's timer pass after its fan-out), no closure allocated per call.
    package func deferUntilIdle(_ object: any IdleDeferring) {
        precondition(inEventLoop)
        deferred.append(.object(object))
    }

    /// Calls `flusher.flushAtEndOfTurn()` once the current batch of events, jobs, timers and deferred actions is
    /// handled: output queued during the turn leaves in one go. Ask once per turn (the flusher keeps a flag).
    package func flushAtEndOfTurn(_ flusher: any EndOfTurnFlushing) {
        precondition(inEventLoop)
        turnEndFlushers.append(flusher)
    }

    /// Calls `work.runAfterOutput()` once this turn's output has left: after the deferred work and the end-of-turn
    /// flushes, followed by flushes of its own. For bulk work a turn should not wait behind (a relay's new
    /// connections' handshakes): the packets of the calls the loop serves are read, answered and sent first. Work
    /// that asks again runs once per turn, in later turns, after each turn's own output; the loop polls its
    /// descriptors without sleeping meanwhile.
    package func afterOutput(_ work: any AfterOutputWork) {
        precondition(inEventLoop)
        behindOutput.append(work)
    }

    /// Stops the loop after the jobs already queued and waits for its thread (unless called on it).
    package func shutdown() {
        execute { [self] in running = false }
        guard !inEventLoop, let thread = threadID.withLock({ $0 }) else { return }
        let alreadyJoined = finished.withLock { done -> Bool in
            defer { done = true }
            return done
        }
        if !alreadyJoined { pthread_join(thread, nil) }
    }

    // MARK: The loop

    /// CPU time the loop's thread has used (CLOCK_THREAD_CPUTIME_ID of that thread), nanoseconds; nil until the
    /// thread started. Safe from any thread; unlike wall time, the VM's scheduling does not move it.
    package var threadCPUNanoseconds: UInt64? {
        guard let clock = cpuClock.withLock({ $0 }) else { return nil }
        var time = timespec()
        guard clock_gettime(clock, &time) == 0 else { return nil }
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }

    private func run() {
        threadStart?.onLoopThread()
        // The thread carries the loop's name (the kernel keeps 15 bytes): profiles (`perf report --sort comm`) and
        // `top -H` tell the relay's loops from the clients'.
        _ = ptt_name_this_thread(name)
        if let key = EventLoop.currentLoopKey {
            // Unmanaged invariant: the address is only compared (`inEventLoop`), and `run` holds a strong reference.
            _ = pthread_setspecific(key, Unmanaged.passUnretained(self).toOpaque())
        }
        defer { EventLoop.currentLoopKey.map { _ = pthread_setspecific($0, nil) } }
        var clock = clockid_t()
        if pthread_getcpuclockid(pthread_self(), &clock) == 0 { cpuClock.withLock { $0 = clock } }
        var events = [epoll_event](repeating: epoll_event(), count: 128)
        while running {
            let count = epoll_wait(epollFD, &events, Int32(events.count), queuedFromLoop ? 0 : -1)
            queuedFromLoop = false
            if count < 0 {
                if errno == EINTR { continue }
                fatalError("epoll_wait failed: \(errnoDescription(errno))")
            }
            for index in 0..<Int(count) {
                let fd = events[index].data.fd
                let ready = events[index].events
                if fd == wakeFD {
                    var value: UInt64 = 0
                    _ = read(wakeFD, &value, 8)
                } else if fd == timerFD {
                    var value: UInt64 = 0
                    _ = read(timerFD, &value, 8)
                    armedDeadline = .max
                } else {
                    handlers[fd]?(ready)
                }
            }
            runJobs()
            runTimers()
            finishTurn()
            runBehindOutput()
            armTimer()
        }
        // The last jobs, then refuse new ones (`submit` throws rather than wait for a loop that is gone).
        repeat {
            runJobs()
            finishTurn()
        } while !jobs.withLock({ state -> Bool in
            if !state.queue.isEmpty { return false }
            state.stopped = true
            return true
        })
        // Break reference cycles through the closures the loop held (drivers, sockets).
        handlers.removeAll()
        timers = TimerQueue()
        deferred.removeAll()
        deferredNow.removeAll()
        turnEndFlushers.removeAll()
        behindOutput.removeAll()
        behindOutputNow.removeAll()
    }

    private func runJobs() {
        while true {
            let batch = jobs.withLock { state -> [@Sendable () -> Void] in
                let batch = state.queue
                state.queue.removeAll(keepingCapacity: true)
                state.wakePending = false
                return batch
            }
            if batch.isEmpty { return }
            for job in batch { job() }
        }
    }

    private func runTimers() {
        let now = MonotonicClock.now()
        for action in timers.popDue(now: now) { action() }
    }

    private func runDeferred() {
        while !deferred.isEmpty {
            swap(&deferred, &deferredNow)
            for item in deferredNow {
                switch item {
                case .action(let action): action()
                case .object(let object): object.runWhenIdle()
                }
            }
            deferredNow.removeAll(keepingCapacity: true)
        }
    }

    /// Deferred actions, then the end-of-turn flushes (which may defer more work, e.g. writers waiting for room).
    private func finishTurn() {
        repeat {
            runDeferred()
            while !turnEndFlushers.isEmpty {
                swap(&turnEndFlushers, &flushingNow)
                for flusher in flushingNow { flusher.flushAtEndOfTurn() }
                flushingNow.removeAll(keepingCapacity: true)
            }
        } while !deferred.isEmpty
    }

    /// The work waiting behind this turn's output, once each, then the output it made. What it asks again waits
    /// for the next turn, which then polls instead of sleeping.
    private func runBehindOutput() {
        guard !behindOutput.isEmpty else { return }
        swap(&behindOutput, &behindOutputNow)
        for work in behindOutputNow { work.runAfterOutput() }
        behindOutputNow.removeAll(keepingCapacity: true)
        finishTurn()
        if !behindOutput.isEmpty { queuedFromLoop = true }
    }

    private func armTimer() {
        guard let deadline = timers.nextDeadline() else { return }
        if deadline <= MonotonicClock.now() {  // already due: loop again without sleeping
            var one: UInt64 = 1
            jobs.withLock { $0.wakePending = true }
            _ = write(wakeFD, &one, 8)
            return
        }
        guard deadline != armedDeadline else { return }
        armedDeadline = deadline
        var spec = itimerspec()
        spec.it_value.tv_sec = Int(deadline / 1_000_000_000)
        spec.it_value.tv_nsec = Int(deadline % 1_000_000_000)
        _ = timerfd_settime(timerFD, Int32(TFD_TIMER_ABSTIME), &spec, nil)
    }
}

/// Work `EventLoop.deferUntilIdle` runs: a closure, or an object's `runWhenIdle`.
private enum Deferred {
    case action(() -> Void)
    case object(any IdleDeferring)
}

/// An object with work deferred until the loop's current batch is handled (`EventLoop.deferUntilIdle(_:)`).
package protocol IdleDeferring: AnyObject {
    /// Loop thread: the deferred work.
    func runWhenIdle()
}

/// An object with work that waits behind a turn's output (`EventLoop.afterOutput(_:)`).
package protocol AfterOutputWork: AnyObject {
    /// Loop thread: the work (ask `afterOutput` again for more in a later turn).
    func runAfterOutput()
}

/// An object with queued output (a UDP send batch) that the loop flushes at the end of a turn.
package protocol EndOfTurnFlushing: AnyObject {
    /// Loop thread: sends what was queued during the turn.
    func flushAtEndOfTurn()
}
