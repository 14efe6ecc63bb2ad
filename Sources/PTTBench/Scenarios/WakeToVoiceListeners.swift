import Foundation
import PTTTalkGroups
import PTTTransport
import TransportCore

/// The suspended listeners of one `wake-to-voice` round: talk-group phones that joined once, suspended, and wake when
/// the emulated push delivers their ticket; what each heard and when.
final class WakeToVoiceListener: Sendable {
    let phone: TalkGroupPhone
    /// When its push arrived and it started its network (`wake(ticket:)`).
    let networkStart = Locked<ContinuousClock.Instant?>(nil)
    /// What was heard of each burst: every sequence's first arrival, and how many frames (repeats included), kept
    /// as they arrive so the bench's polling costs nothing per frame.
    private let heard = Locked<[UInt64: (first: [UInt32: ContinuousClock.Instant], count: Int)]>([:])
    /// Of each burst: the first datagram the phone received (`HeardFrame.receivedAt`, the earliest of any frame)
    /// and when the app got its first frame from `frames` (after the phone's catch-up ordering).
    private let firstAudio = Locked<[UInt64: (datagram: ContinuousClock.Instant, app: ContinuousClock.Instant)]>([:])
    private let session = Locked<ResumptionState?>(nil)
    private let reader = Locked<Task<Void, Never>?>(nil)

    init(index: Int, group: String, client: TransportClient, relay: ServerAddress) throws {
        let session = session
        phone = try TalkGroupPhone(
            client: client, relay: relay,
            configuration: .init(
                user: try MemberIdentity("listener-\(index)"), group: group,
                wakeAddress: try WakeAddress(platform: .other, token: "token-\(index)")),
            resumption: ResumptionStore(
                load: { session.withLock { $0 } }, save: { state in session.withLock { $0 = state } }))
        let (heard, firstAudio) = (heard, firstAudio)
        reader.withLock {
            $0 = Task { [phone] in
                for await frame in phone.frames {
                    let app = ContinuousClock.now
                    firstAudio.withLock { first in
                        let entry = first[frame.header.burst] ?? (frame.receivedAt, app)
                        first[frame.header.burst] = (min(entry.datagram, frame.receivedAt), entry.app)
                    }
                    heard.withLock { heard in
                        var entry = heard[frame.header.burst] ?? ([:], 0)
                        if entry.first[frame.header.sequence] == nil {
                            entry.first[frame.header.sequence] = frame.receivedAt
                        }
                        entry.count += 1
                        heard[frame.header.burst] = entry
                    }
                }
            }
        }
    }

    /// The emulated push arrived: start the network with its ticket.
    func woken(by ticket: WakeTicket) {
        networkStart.withLock { $0 = .now }
        Task { try? await phone.wake(ticket: ticket) }
    }

    /// Frames heard of `burst` (repeats included).
    func count(of burst: UInt64) -> Int { heard.withLock { $0[burst]?.count ?? 0 } }

    /// Distinct sequences heard of `burst`.
    func distinct(of burst: UInt64) -> Int { heard.withLock { $0[burst]?.first.count ?? 0 } }

    /// The phone's own share of `burst`'s first audio: from the first datagram of the burst it received to the
    /// app's first frame (nil: none heard).
    func phoneShareOfFirstAudio(of burst: UInt64) -> Duration? {
        firstAudio.withLock { $0[burst].map { $0.app - $0.datagram } }
    }

    /// Distinct sequences heard of `burst`, with each one's first arrival.
    func arrivals(of burst: UInt64) -> [UInt32: ContinuousClock.Instant] { heard.withLock { $0[burst]?.first ?? [:] } }

    func stop() {
        phone.stop()
        reader.withLock { $0 }?.cancel()
    }
}
