import Foundation
import TransportCore

/// Server secrets kept in files so a fleet of relays (and a restarted relay) share them.
package enum SecretFile {
    /// Reads exactly `length` bytes from `path`, or creates the file with fresh random bytes (mode 0600).
    package static func loadOrCreate(path: String, length: Int) throws(TransportError) -> [UInt8] {
        if FileManager.default.fileExists(atPath: path) { return try load(path: path, length: length) }
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
        guard
            FileManager.default.createFile(
                atPath: path, contents: Data(bytes),
                attributes: [.posixPermissions: 0o600])
        else {
            throw TransportError(.invalidConfiguration, "cannot create the secret file \(path)")
        }
        return bytes
    }

    /// Reads exactly `length` bytes from an existing `path`.
    package static func load(path: String, length: Int) throws(TransportError) -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw TransportError(.invalidConfiguration, "cannot read the secret file \(path)")
        }
        guard data.count == length else {
            throw TransportError(
                .invalidConfiguration,
                "the secret file \(path) holds \(data.count) bytes; it must hold exactly \(length)")
        }
        return [UInt8](data)
    }
}
