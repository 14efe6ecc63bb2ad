import BenchSupport
import ChildProcesses
import TransportCore
import TransportIO

/// A QUIC server endpoint on the benchmark's certificate and a client TLS context trusting its CA, exchanging
/// packets in memory (`InMemoryExchange`): the set-up of every in-memory floor the benchmark measures.
struct InMemoryPeers {
    let exchange: InMemoryExchange
    let clientTLS: TLSClientContext

    /// `earlyDataWindow`: how long (ms) a ticket allows 0-RTT; nil: the server refuses 0-RTT.
    init(certificate: String, privateKey: String, ca: String, earlyDataWindow: UInt32?) throws(TransportError) {
        let tls = try TLSServerContext(
            certificateChain: PEMFile.read(certificate), privateKey: PEMFile.read(privateKey),
            ticketKey: (0..<64).map { _ in UInt8.random(in: 0...255) }, earlyDataWindow: earlyDataWindow)
        let endpoint = try QUICServerEndpoint(parameters: QUICParameters(), tls: tls, secrets: .random())
        clientTLS = try TLSClientContext(trust: PEMFile.trust(caFile: ca))
        exchange = InMemoryExchange(server: endpoint)
    }

    /// Runs `body` on a thread of its own (a floor measured with the thread CPU clock owns its thread).
    static func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws(TransportError) -> T) async throws -> T {
        let outcome = await onThread { () -> Result<T, TransportError> in
            do throws(TransportError) {
                return .success(try body())
            } catch {
                return .failure(error)
            }
        }
        return try outcome.get()
    }
}
