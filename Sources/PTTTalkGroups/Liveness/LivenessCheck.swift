import PTTTransport

/// The application error code a `RelayChannel` closes a member's connection with when it stopped answering (see
/// `LivenessCheck`): the peer, if it ever hears it, knows the relay gave up on it.
public let unresponsiveCloseCode: UInt64 = 0x5054_0002

/// How a `RelayChannel` notices a member that vanished mid-burst (phone off the network, process killed) long
/// before its connection's idle timeout, without shortening that timeout for members that are merely quiet.
///
/// Only a member that was sending audio is watched. When its audio stops for `silence` (no end-of-burst is needed),
/// the channel asks that one connection for a sign of life — over QUIC one PING (the peer's ACK answers), over TCP
/// one QX_PING (the peer's response answers) — and if nothing at all arrives from it within `answerWithin`, the
/// member leaves the channel (and its floor, `FloorReleaseReason.unresponsive`) and its connection is closed with
/// `unresponsiveCloseCode`. A live member answers within about a round trip and stays; a member that never sent
/// audio is never probed, so a listener can stay silent for as long as its idle timeout allows. Once the probe was
/// answered the member is watched again from its next frame on.
///
/// With the defaults a vanished talker is gone from the channel 0.25 + 0.6 s after its last frame (plus a timer
/// turn). Over QUIC a lost PING or ACK is retransmitted within the budget (a probe timeout on a mobile path is
/// about 2 × RTT + 25 ms); keep `answerWithin` above a few round trips of the worst path served.
public struct LivenessCheck: Sendable, Hashable {
    /// How long a member's audio may pause before it is asked for a sign of life (≥ 1 ms; audio frames come every
    /// 20 ms, so a few hundred milliseconds is an ended or broken burst).
    public var silence: Duration
    /// How long it has to answer (≥ 1 ms).
    public var answerWithin: Duration

    /// A check probing after `silence` (default 250 ms) and giving up after `answerWithin` (default 600 ms).
    public init(silence: Duration = .milliseconds(250), answerWithin: Duration = .milliseconds(600)) {
        self.silence = silence
        self.answerWithin = answerWithin
    }
}
