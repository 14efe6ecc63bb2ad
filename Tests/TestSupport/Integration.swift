import Foundation
import Testing

/// The suites that start processes, open real sockets or wait on real time: the integration speed. Each of their
/// test cases runs only while it holds one of `IntegrationGate.width` places, so a 2-vCPU machine never runs a
/// hundred relays, peers and Redis servers at once (their deadlines then measure the machine, not the code); unit
/// suites run beside them without a place.
///
/// Apply it to a suite (`@Suite("...", .integration)`): it reaches every test in it and in its nested suites.
public struct IntegrationTrait: SuiteTrait, TestTrait, TestScoping {
    public var isRecursive: Bool { true }

    public func scopeProvider(for test: Test, testCase: Test.Case?) -> IntegrationTrait? {
        testCase == nil ? nil : self  // each test case holds a place while it runs
    }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        if IntegrationGate.held { return try await function() }  // a nested suite's trait: the place is held
        await IntegrationGate.shared.enter()
        defer { IntegrationGate.shared.leave() }
        try await IntegrationGate.$held.withValue(true) { try await function() }
    }
}

extension Trait where Self == IntegrationTrait {
    /// Starts processes, opens real sockets or waits on real time: runs within `IntegrationGate.width` at once.
    public static var integration: Self { IntegrationTrait() }
}

/// How many integration test cases run at once: `PTT_INTEGRATION_WIDTH`, else the number of CPUs (at least 2).
/// Waiting for a place costs no CPU, and a test's own deadlines start only once it holds one.
public final class IntegrationGate: Sendable {
    public static let shared = IntegrationGate(width: IntegrationGate.configuredWidth)
    @TaskLocal static var held = false

    public let width: Int
    private let state: Mutex
    private struct Waiting {
        var free: Int
        var queue: [CheckedContinuation<Void, Never>] = []
    }

    init(width: Int) {
        self.width = max(1, width)
        state = Mutex(Waiting(free: self.width))
    }

    static var configuredWidth: Int {
        if let text = ProcessInfo.processInfo.environment["PTT_INTEGRATION_WIDTH"], let width = Int(text), width > 0 {
            return width
        }
        return max(2, ProcessInfo.processInfo.activeProcessorCount)
    }

    func enter() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { waiting -> Bool in
                if waiting.free > 0 {
                    waiting.free -= 1
                    return true
                }
                waiting.queue.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    func leave() {
        let next = state.withLock { waiting -> CheckedContinuation<Void, Never>? in
            if waiting.queue.isEmpty {
                waiting.free += 1
                return nil
            }
            return waiting.queue.removeFirst()  // the place passes to the first waiting, in order
        }
        next?.resume()
    }

    /// A lock around the places (Foundation's NSLock; Synchronization's Mutex needs a newer deployment target on
    /// some platforms).
    private final class Mutex: @unchecked Sendable {  // invariant: `value` is read and written only under `lock`
        private let lock = NSLock()
        private var value: Waiting
        init(_ value: Waiting) { self.value = value }
        func withLock<T>(_ body: (inout Waiting) -> T) -> T {
            lock.lock()
            defer { lock.unlock() }
            return body(&value)
        }
    }
}
