import Foundation
import Glibc

/// A packet capture by `dumpcap` (Wireshark's capture engine) into a pcapng file, for tests that decode what went
/// over the wire. Started and awaited until the interface is open, stopped with SIGTERM (dumpcap then completes
/// the file). Needs the capture privilege (root, or dumpcap's capabilities). Killed if still running when released.
package final class PacketCapture: Sendable {
    /// The pcapng file being written.
    package let file: String
    /// The loopback port whose UDP and TCP packets are captured.
    package let port: UInt16
    /// dumpcap (its standard error, a pipe, is where it prints its packet counts).
    private let program: SpawnedProgram

    private init(file: String, port: UInt16, program: SpawnedProgram) {
        (self.file, self.port, self.program) = (file, port, program)
    }

    /// Captures the UDP and TCP packets to or from `port` on loopback into `file`; returns once dumpcap has written
    /// the file's header, which it does only after opening the interface and compiling the filter, so packets
    /// sent after this returns are captured.
    ///
    /// - Throws: `ChildProcessError` with what dumpcap printed when it cannot start or capture within `readyWithin`.
    package static func start(
        dumpcap: String, port: UInt16, file: String, readyWithin: Duration = .seconds(10)
    ) async throws -> PacketCapture {
        unlink(file)
        let program: SpawnedProgram
        do {
            program = try SpawnedProgram(
                dumpcap, ["-q", "-i", "lo", "-f", "port \(port)", "-w", file], output: .discard)
        } catch {
            throw ChildProcessError("cannot start \(dumpcap): \(error)")
        }
        let capture = PacketCapture(file: file, port: port, program: program)
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: readyWithin)
        while clock.now < deadline && program.isRunning {
            var info = stat()
            if stat(file, &info) == 0 && info.st_size > 0 { return capture }
            try await Task.sleep(for: .milliseconds(10))
        }
        let said = await capture.stop()
        throw ChildProcessError("dumpcap did not start capturing on lo within \(readyWithin): \(said.output)")
    }

    /// Stops once every packet sent before the call is in the file, then as `stop`. dumpcap takes packets from the
    /// kernel in blocks and drops the pending block on SIGTERM; so this sends a marker datagram to the captured
    /// port first and waits (at most `within`) until the marker is in the file: everything sent earlier is too.
    /// The wait ends as soon as the marker is there; its bound is generous because a loaded machine may starve
    /// dumpcap for seconds, and stopping it early loses the block that holds the session.
    @discardableResult
    package func finish(within: Duration = .seconds(30)) async -> (status: Int32, output: String) {
        let marker = Array("ptt capture marker \(UUID())".utf8)
        let socket = Glibc.socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: within)
        var nextSend = clock.now
        while clock.now < deadline && program.isRunning {
            if clock.now >= nextSend {  // again now and then: a lost marker must not stall the test
                _ = withUnsafePointer(to: &address) { pointer in
                    pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sockaddrPointer in
                        marker.withUnsafeBytes {
                            sendto(
                                socket, $0.baseAddress, $0.count, 0, sockaddrPointer,
                                socklen_t(MemoryLayout<sockaddr_in>.size))
                        }
                    }
                }
                nextSend = clock.now.advanced(by: .milliseconds(500))
            }
            if let data = FileManager.default.contents(atPath: file), data.range(of: Data(marker)) != nil { break }
            try? await Task.sleep(for: .milliseconds(20))
        }
        close(socket)
        return await stop()
    }

    /// SIGTERM, at most `within` seconds to finish the file, then SIGKILL; returns dumpcap's exit status and what
    /// it printed on standard error (its packet counts). Packets dumpcap has not taken from the kernel yet are
    /// lost: see `finish`.
    @discardableResult
    package func stop(within: TimeInterval = 5) async -> (status: Int32, output: String) {
        await onThread { [self] in
            program.terminate(within: within)
            let output = String(decoding: program.readToEnd(program.errors), as: UTF8.self)
            return (program.terminationStatus, output)
        }
    }
}
