import Foundation
import TransportCore

extension ResumptionState {
    /// Decodes saved state from `Data` (a file's or a keychain item's contents).
    ///
    /// - Throws: `TransportError` with code `resumptionStateUnusable`, as `init(serialized:)` with bytes.
    public init(serialized data: Data) throws {
        try self.init(serialized: [UInt8](data))
    }

    /// The state saved at `path` by `save(to:)`, or nil when there is no file there (a first start).
    ///
    /// - Throws: `TransportError` with code `resumptionStateUnusable` when the file cannot be read or its
    ///   contents are corrupt, foreign or from an unsupported version. Callers normally log it and connect cold.
    public static func load(from path: String) throws -> ResumptionState? {
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw TransportError(
                .resumptionStateUnusable,
                "cannot read the saved state at \(path); connecting without it")
        }
        return try ResumptionState(serialized: data)
    }

    /// Saves the state at `path`, readable by this user only (mode 0600: it holds a session secret), replacing
    /// the previous file atomically so a process killed mid-write never leaves a truncated state.
    ///
    /// - Throws: `TransportError` with code `invalidConfiguration` naming the path when it cannot be written.
    public func save(to path: String) throws {
        let temporary = path + ".tmp"
        guard
            FileManager.default.createFile(
                atPath: temporary, contents: Data(serialized()),
                attributes: [.posixPermissions: 0o600])
        else {
            throw TransportError(
                .invalidConfiguration,
                "cannot write the saved state next to \(path): check the directory exists and is writable")
        }
        guard rename(temporary, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw TransportError(.invalidConfiguration, "cannot replace the saved state at \(path): \(reason)")
        }
    }
}
