import Foundation
import PTTTransport

/// `connect --session-file`: reading the resumption state on disk (`ResumptionState.load(from:)`; saved with
/// `ResumptionState.save(to:)`).
enum SessionFile {
    /// The saved state, or nil (with one line on stderr saying why) when the file is missing or unusable.
    static func load(_ path: String) -> ResumptionState? {
        do {
            return try ResumptionState.load(from: path)
        } catch {
            FileHandle.standardError.write(Data("ptt-transport: ignoring session file \(path): \(error)\n".utf8))
            return nil
        }
    }
}
