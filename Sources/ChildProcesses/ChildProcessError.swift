/// A program that could not be started, or a server that did not say it was listening.
package struct ChildProcessError: Error, CustomStringConvertible {
    /// What went wrong, with what the program printed.
    package let description: String

    package init(_ description: String) { self.description = description }
}
