internal import CNetworkEmulation
import TransportIO

extension EventLoop {
    /// Benchmark isolation: keeps this loop's thread on CPU `cpu`, so a load generator and the relay under test do
    /// not share a core. Returns once applied; false when the kernel refused.
    package func pin(toCPU cpu: Int32) async -> Bool {
        (try? await submit { ptt_pin_current_thread(cpu) == 0 }) ?? false
    }
}
