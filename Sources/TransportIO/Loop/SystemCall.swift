import Glibc
import TransportCore

/// Runs a system call, retrying on EINTR; a failure becomes a `TransportError` naming the call and errno.
@discardableResult
package func systemCall<T: BinaryInteger>(_ name: String, _ body: () -> T) throws(TransportError) -> T {
    while true {
        let result = body()
        if result >= 0 { return result }
        let code = errno
        if code == EINTR { continue }
        throw TransportError(
            .systemCallFailed, "\(name) failed: \(errnoDescription(code))\(exhaustionHint(code))",
            libraryCode: Int(code))
    }
}

/// The text for an errno value.
package func errnoDescription(_ code: Int32) -> String {
    guard let text = strerror(code) else { return "errno \(code)" }
    return String(cString: text)
}
