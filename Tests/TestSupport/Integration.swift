import Foundation
import Testing

/// The suites that start processes, open real sockets or wait on real time: the integration speed. Each of their
/// test cases runs only while it holds one of `IntegrationGate.width` places, so a 2-vCPU machine never runs a
/// hundred relays, peers and Redis servers at once (their deadlines then measure the machine, not the code); unit
/// suites run beside them without a place.
///
/// Apply it to a suite (`@Suite("...", .integration)`): it reaches every test in it and in its nested suites.
public struct IntegrationTrait: SuiteTrait, TestTrait, TestScoping {
    /// Whether the test runs with no other integration test beside it (it holds every place): for a test that
    /// counts what the whole process holds (open descriptors, memory).
    public var alone = false

    public var isRecursive: Bool { true }

    public func scopeProvider(for test: Test, testCase: Test.Case?) -> IntegrationTrait? {
        testCase == nil ? nil : self  // each test case holds a place while it runs
    }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        let gate = IntegrationGate.shared
        let wanted = alone ? gate.width : 1
        let held = IntegrationGate.held
        guard wanted > held else { return try await function() }  // a nested suite's trait: the places are held
        await gate.enter(wanted - held)
        defer { gate.leave(wanted - held) }
        try await IntegrationGate.$held.withValue(wanted) { try await function() }
    }
}

extension Trait where Self == IntegrationTrait {
    /// Starts processes, opens real sockets or waits on real time: runs within `IntegrationGate.width` at once.
    public static var integration: Self { IntegrationTrait() }

    /// Like `integration`, with no other integration test running at the same time.
    public static var integrationAlone: Self { IntegrationTrait(alone: true) }
}

/// How many integration test cases run at once: `PTT_INTEGRATION_WIDTH`, else the number of CPUs (at least 2).
/// Waiting for a place costs no CPU, and a test's own deadlines start only once it holds one.
public final class IntegrationGate: Sendable {
    public static let shared = IntegrationGate(width: IntegrationGate.configuredWidth)
    /// The places the current task holds.
    @TaskLocal static var held = 0

    public let width: Int
    private let state: Mutex
    private struct Waiting {
        var free: Int
        var queue: [(places: Int, continuation: CheckedContinuation<Void, Never>)] = []
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

    /// Waits until `places` are free and takes them; first come, first served (a test waiting for every place is
    /// not overtaken by later ones).
    func enter(_ places: Int) async {
        let places = min(places, width)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { waiting -> Bool in
                if waiting.queue.isEmpty && waiting.free >= places {
                    waiting.free -= places
                    return true
                }
                waiting.queue.append((places, continuation))
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// Gives back `places` and lets in the waiting, in order, while their places are free.
    func leave(_ places: Int) {
        let places = min(places, width)
        let next = state.withLock { waiting -> [CheckedContinuation<Void, Never>] in
            waiting.free += places
            var admitted: [CheckedContinuation<Void, Never>] = []
            while let first = waiting.queue.first, first.places <= waiting.free {
                waiting.free -= first.places
                admitted.append(waiting.queue.removeFirst().continuation)
            }
            return admitted
        }
        for continuation in next { continuation.resume() }
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
