import Foundation
import PTTTransport

/// `connect --session-file`: the resumption state on disk, written atomically with mode 0600.
enum SessionFile {
    /// The saved state, or nil (with one line on stderr saying why) when the file is missing or unusable.
    static func load(_ path: String) -> ResumptionState? {
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        guard let data = FileManager.default.contents(atPath: path) else {
            warn("cannot read session file \(path); connecting without it")
            return nil
        }
        do {
            return try ResumptionState(serialized: [UInt8](data))
        } catch {
            warn("ignoring session file \(path): \(error)")
            return nil
        }
    }

    static func save(_ state: ResumptionState, to path: String) throws {
        let temporary = path + ".tmp"
        guard FileManager.default.createFile(atPath: temporary, contents: Data(state.serialized()),
                                             attributes: [.posixPermissions: 0o600]) else {
            throw Arguments.Failure(description: "cannot write session file \(path)")
        }
        guard rename(temporary, path) == 0 else {
            throw Arguments.Failure(description: "cannot replace session file \(path): \(String(cString: strerror(errno)))")
        }
    }

    private static func warn(_ text: String) {
        FileHandle.standardError.write(Data("ptt-transport: \(text)\n".utf8))
    }
}
