import TransportCore
import TransportIO

/// A value created on first use and kept; a failed creation is not remembered, so the next use tries again.
///
/// The shared client event loop lives in one: if the process is out of file descriptors when the first connection
/// starts, that `connect` throws and a later one, once descriptors are free, starts the loop.
package final class RetryingLazy<Value: Sendable>: Sendable {
    private let make: @Sendable () throws(TransportError) -> Value
    private let value = Locked<Value?>(nil)

    package init(_ make: @escaping @Sendable () throws(TransportError) -> Value) {
        self.make = make
    }

    /// The value, creating it now if no earlier call succeeded. Concurrent first calls create it once.
    package func get() throws(TransportError) -> Value {
        try value.withLock { stored throws(TransportError) -> Value in
            if let stored { return stored }
            let made = try make()
            stored = made
            return made
        }
    }
}
