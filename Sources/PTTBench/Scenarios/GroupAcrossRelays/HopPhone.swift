import Foundation
import PTTTalkGroups
import PTTTransport
import TransportCore

/// A phone of `group-across-relays`: what it heard (each frame's burst, sequence and arrival) and the grants it was
/// told of, for the per-hop latency, the re-home and the contested requests.
final class HopPhone: Sendable {
    let phone: TalkGroupPhone
    let user: String
    private let heard = Locked<[AudioKey: ContinuousClock.Instant]>([:])
    private let grants = Locked<Set<UInt64>>([])
    /// The grants already taken (a queued request waits for one not among them).
    private let used = Locked<Set<UInt64>>([])
    private let readers: [Task<Void, Never>]

    struct AudioKey: Hashable {
        var burst: UInt64
        var sequence: UInt32
    }

    init(user: String, group: String, client: TransportClient, relay: ServerAddress) throws {
        self.user = user
        phone = try TalkGroupPhone(
            client: client, relay: relay, configuration: .init(user: try MemberIdentity(user), group: group))
        let (phone, heard, grants) = (phone, heard, grants)
        readers = [
            Task {
                for await frame in phone.frames {
                    let key = AudioKey(burst: frame.header.burst, sequence: frame.header.sequence)
                    heard.withLock { if $0[key] == nil { $0[key] = frame.receivedAt } }
                }
            },
            Task {
                for await event in phone.events {
                    if case .granted(let burst) = event { grants.withLock { _ = $0.insert(burst) } }
                }
            },
        ]
    }

    deinit { for reader in readers { reader.cancel() } }

    func ready() async throws { _ = try await phone.link.nextReady() }

    /// When each frame of `burst` arrived, by sequence.
    func arrivals(of burst: UInt64) -> [UInt32: ContinuousClock.Instant] {
        heard.withLock { heard in
            var arrivals: [UInt32: ContinuousClock.Instant] = [:]
            for (key, at) in heard where key.burst == burst { arrivals[key.sequence] = at }
            return arrivals
        }
    }

    /// Asks for the floor; a place in line waits (at most `limit`) for the grant. The burst, or nil (denied, or no
    /// grant in time).
    func takeFloor(within limit: Duration = .seconds(3)) async throws -> UInt64? {
        switch try await phone.requestFloor() {
        case .granted(let burst):
            grants.withLock { _ = $0.insert(burst) }
            used.withLock { _ = $0.insert(burst) }
            return burst
        case .denied: return nil
        case .queued:
            let deadline = ContinuousClock.now.advanced(by: limit)
            while ContinuousClock.now < deadline {
                let used = used.withLock { $0 }
                if let burst = grants.withLock({ $0.subtracting(used).first }) {
                    self.used.withLock { _ = $0.insert(burst) }
                    return burst
                }
                try await Task.sleep(for: .milliseconds(2))
            }
            return nil
        }
    }

    /// Sends `frames` frames `every` apart, then releases the floor.
    func talk(frames: Int, every interval: Duration = .milliseconds(20)) async throws {
        let audio = [UInt8](repeating: 0x55, count: 60)
        var next = ContinuousClock.now
        for index in 0..<frames {
            try phone.sendAudio(audio, last: index == frames - 1)
            next = next.advanced(by: interval)
            try? await Task.sleep(until: next)
        }
        try await phone.releaseFloor()
    }
}
