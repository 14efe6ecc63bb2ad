import Glibc

/// The top of the process's descriptor table that accepted connections may not take, so a flood of connections
/// cannot run the whole process out of descriptors: the Swift runtime (Dispatch traps when it cannot open one),
/// certificate files, logs and outgoing sockets keep working while the listener refuses newcomers.
package enum DescriptorHeadroom {
    /// Descriptors kept free below the soft RLIMIT_NOFILE: 1/16 of it, at least 4 and at most 32.
    package static func reserve(forLimit limit: Int) -> Int { min(32, max(4, limit / 16)) }

    /// Whether a descriptor just allocated lies in the reserve. The kernel hands out the lowest free number, so
    /// when `fd` is in the top `reserve` slots every lower one is taken and fewer than `reserve` remain free.
    package static func isInReserve(_ fd: Int32) -> Bool {
        guard let limit = softLimit else { return false }
        return Int(fd) >= limit - reserve(forLimit: limit)
    }

    /// The soft RLIMIT_NOFILE now (nil when unlimited or unknown). Read at each use (one getrlimit per accepted
    /// connection): `prlimit` can change it while the process runs.
    package static var softLimit: Int? {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur != rlim_t.max
        else { return nil }
        return Int(clamping: limit.rlim_cur)
    }
}
