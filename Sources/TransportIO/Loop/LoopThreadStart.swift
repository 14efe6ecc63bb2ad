import TransportCore

/// A tool's part in starting an event loop's thread: prepared on the thread that creates the loop, run first on
/// the loop's new thread. The network emulator uses it so that a loop created inside an emulated namespace opens
/// its sockets there while its thread stays outside. The library installs none.
package struct LoopThreadStart: Sendable {
    /// Prepares a start on the thread that creates an event loop; nil: nothing to do for this loop.
    package typealias Preparation = @Sendable () -> LoopThreadStart?

    /// Runs on the loop's new thread before its first turn.
    package var onLoopThread: @Sendable () -> Void
    /// Runs instead of `onLoopThread` when the loop's thread could not be started (releases what was prepared).
    package var ifNotStarted: @Sendable () -> Void

    /// A start that runs `onLoopThread` on the new thread, or `ifNotStarted` when there is none.
    package init(onLoopThread: @escaping @Sendable () -> Void, ifNotStarted: @escaping @Sendable () -> Void) {
        self.onLoopThread = onLoopThread
        self.ifNotStarted = ifNotStarted
    }

    private static let preparation = Locked<Preparation?>(nil)

    /// Makes every event loop created from now on ask `preparation` for its thread's start.
    package static func install(_ preparation: @escaping Preparation) {
        Self.preparation.withLock { $0 = preparation }
    }

    /// What the installed preparation gives for a loop the calling thread creates now (nil: none installed).
    static func prepare() -> LoopThreadStart? {
        preparation.withLock { $0 }?()
    }
}
