import TransportCore
import TransportIO

extension TransportConnection {
    /// A connection's identity within this process: a counter, so two connections never share one (not even
    /// after one was released). Printable, for logs: `connection-12`. Unrelated to QUIC connection IDs.
    public struct ID: Hashable, Comparable, Sendable, CustomStringConvertible {
        /// The counter value, starting at 1 in order of creation.
        public let rawValue: UInt64

        /// `connection-<rawValue>`.
        public var description: String { "connection-\(rawValue)" }

        /// Orders by creation.
        public static func < (lhs: ID, rhs: ID) -> Bool { lhs.rawValue < rhs.rawValue }

        private static let counter = Locked<UInt64>(0)

        /// The next unused identity.
        package static func next() -> ID {
            ID(
                rawValue: counter.withLock { value in
                    value += 1
                    return value
                })
        }
    }
}
