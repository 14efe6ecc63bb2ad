internal import CNetworkEmulation
import Glibc
import TransportIO

/// The emulator's two TransportIO hooks, installed once, before the first thread enters an emulated namespace
/// (`EmulatedNetwork.withNamespace`). An event loop created inside a namespace takes descriptors of that namespace
/// and of the one its creator left; its thread goes back to the latter, so threads it starts (the concurrency
/// runtime's workers) never end up in the emulated network, while the sockets it opens belong to the former.
enum NamespaceHooks {
    /// Installs the hooks on first use; later calls do nothing.
    static func install() { _ = installed }

    private static let installed: Void = {
        SocketFactory.install { domain, type, proto in ptt_socket(domain, type, proto) }
        LoopThreadStart.install(loopThreadStart)
    }()

    /// For a loop created by a thread inside `ptt_netns_enter`: the namespace it entered, and the one it left.
    @Sendable private static func loopThreadStart() -> LoopThreadStart? {
        var descriptors: (entered: Int32, left: Int32) = (-1, -1)
        _ = ptt_netns_inherit(&descriptors.entered, &descriptors.left)
        let (entered, left) = descriptors
        guard entered >= 0 else { return nil }
        return LoopThreadStart(
            onLoopThread: {
                let rv = ptt_netns_adopt_for_sockets(entered, left)
                if rv != 0 { fatalError("cannot leave the emulated namespace: \(errnoDescription(-rv))") }
            },
            ifNotStarted: {
                close(entered)
                close(left)
            })
    }
}
