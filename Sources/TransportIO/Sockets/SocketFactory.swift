import Glibc
import TransportCore

/// Where TransportIO's UDP and TCP sockets come from: `socket(2)`, unless a tool installed another opener (the
/// network emulator opens an event loop's sockets inside an emulated network namespace). The library installs
/// none; an opener stays installed for the life of the process.
package enum SocketFactory {
    /// Opens a socket as `socket(2)` does: a descriptor, or -1 with errno set.
    package typealias Opener = @Sendable (_ domain: Int32, _ type: Int32, _ protocol: Int32) -> Int32

    private static let installed = Locked<Opener?>(nil)

    /// Makes `opener` open every socket from now on, in place of `socket(2)`.
    package static func install(_ opener: @escaping Opener) {
        installed.withLock { $0 = opener }
    }

    /// A new socket from the installed opener, or from `socket(2)` when none is: a descriptor, or -1 with errno set.
    package static func socket(domain: Int32, type: Int32, protocol: Int32) -> Int32 {
        if let opener = installed.withLock({ $0 }) { return opener(domain, type, `protocol`) }
        return Glibc.socket(domain, type, `protocol`)
    }
}
