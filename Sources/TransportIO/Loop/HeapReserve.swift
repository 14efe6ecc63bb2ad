internal import CTransportShims

/// Room a relay's event loop makes in its thread's malloc arena before connections arrive.
///
/// glibc grows the arena of a thread other than the main one (every event loop's) by one `mprotect` system call each
/// time an allocation passes the arena's top, a few pages at a time, and never protects those pages again when the
/// heap shrinks. A wake storm of 1,000 phones, each connection about 91 KiB of the relay's memory, made 20 of the
/// relay's 30 system calls per phone `mprotect` (`perf record -e raw_syscalls:sys_enter` on the relay). Reserving
/// makes the arena writable ahead of use once, at start, then frees it again: the pages go back to the system (resident
/// memory does not move), the writable mapping stays, so the storm's connections grow into it without system calls.
package enum HeapReserve {
    /// What a relay's loop reserves: about 550 connections' worth, within glibc's first heap of the arena (64 MiB,
    /// its bookkeeping and the loop's first allocations included; a reservation that spilled into a second heap
    /// would lose that heap again when freed).
    package static let relayLoopBytes = 56 << 20

    /// Reserves `bytes` in the calling thread's arena (call it on the loop's thread); returns the bytes reserved.
    @discardableResult
    package static func onThisThread(bytes: Int = relayLoopBytes) -> Int {
        Int(ptt_reserve_thread_heap(max(0, bytes)))
    }
}
