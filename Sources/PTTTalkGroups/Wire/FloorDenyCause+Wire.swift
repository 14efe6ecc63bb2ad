import PTTTransport
import TransportCore

/// A floor denial's cause on the wire — the reject-cause code, and for #4 the retry-after time in whole
/// milliseconds (at most a day) — as the talk-group protocol and the fleet's trunks both carry it.
extension FloorDenyCause {
    /// The longest retry-after time a denial carries: a day, in milliseconds.
    static let maximumRetryAfterMilliseconds: UInt64 = 86_400_000

    /// Writes the code under `causeKey` and, for #4, the retry-after time under `retryAfterKey`.
    func write(into fields: inout WireFields, causeKey: UInt64, retryAfterKey: UInt64) {
        fields.set(causeKey, uint: UInt64(code))
        guard case .retryAfter(let time) = self else { return }
        let (seconds, attoseconds) = time.components
        let milliseconds = seconds < 0 ? 0 : min(seconds, 86_400) * 1000 + attoseconds / 1_000_000_000_000_000
        fields.set(retryAfterKey, uint: UInt64(min(UInt64(milliseconds), Self.maximumRetryAfterMilliseconds)))
    }

    /// The cause `fields` carry (`defaultCode` when the code is absent; nil `defaultCode`: it is required).
    ///
    /// - Throws: `talkGroupMalformed` for a missing required code or a retry-after time beyond a day.
    init(
        reading fields: WireFields, causeKey: UInt64, retryAfterKey: UInt64, defaultCode: UInt64?
    )
        throws(TransportError)
    {
        let retryAfter = try fields.uint(retryAfterKey, name: "the retry-after time") ?? 0
        guard retryAfter <= Self.maximumRetryAfterMilliseconds else {
            throw WireFields.malformed("a retry-after time exceeds a day")
        }
        let code = try fields.uint(causeKey, name: "the reject cause") ?? defaultCode
        self.init(
            code: try WireFields.required(code, "the reject cause"), retryAfter: .milliseconds(Int64(retryAfter)))
    }
}
