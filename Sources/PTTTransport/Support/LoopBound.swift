import TransportIO

/// A value that may only be touched on one event loop's thread, checked at run time (like NIOLoopBound):
/// lets a Sendable type carry a loop-confined reference without trusting an unchecked promise blindly.
final class LoopBound<Value>: @unchecked Sendable {
    // @unchecked Sendable invariant: `storage` is read and written only on `loop`'s thread (precondition).
    let loop: EventLoop
    private var storage: Value

    init(_ value: Value, loop: EventLoop) {
        self.loop = loop
        self.storage = value
    }

    var value: Value {
        get {
            precondition(loop.inEventLoop, "loop-bound value used off its event loop")
            return storage
        }
        set {
            precondition(loop.inEventLoop, "loop-bound value used off its event loop")
            storage = newValue
        }
    }
}
