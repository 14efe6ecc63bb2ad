import CommandLineSupport
import Foundation

/// Where the lab finds the programs it runs as children: the operator's `ptt-transport` (the relay under test) is
/// built beside `ptt-lab` (`swift build` builds both into one folder); `ptt-lab` runs its own load generator.
enum LabExecutables {
    /// This program (`/proc/self/exe`).
    static func lab() -> String? { try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") }

    /// `ptt-transport` in this program's folder.
    ///
    /// - Throws: when it is not there, saying how to build it.
    static func relay() throws -> String {
        guard let lab = lab() else {
            throw Arguments.Failure(description: "cannot read /proc/self/exe to find ptt-transport beside ptt-lab")
        }
        let relay = URL(fileURLWithPath: lab).deletingLastPathComponent().appendingPathComponent("ptt-transport").path
        guard FileManager.default.isExecutableFile(atPath: relay) else {
            throw Arguments.Failure(
                description: "no ptt-transport beside \(lab): build both first (swift build -c release, or without "
                    + "-c release for a debug lab)")
        }
        return relay
    }
}
