/// Moves a non-Sendable value into a job for an event loop.
///
/// - Important: Invariant: the sender gives the value up — it never touches it again after the transfer, so the
///   loop thread becomes its only user. That is what makes the `@unchecked Sendable` sound.
package struct UnsafeTransfer<Value>: @unchecked Sendable {
    package let value: Value
    package init(_ value: Value) { self.value = value }
}
