/// Where a listener charges new connections to their source (`SourceLedger`): a ledger of its own, or one that
/// all event loops of a server share (then the limits hold per server, wherever the kernel put a connection).
package protocol SourceAdmission: AnyObject {
    /// Sources currently tracked.
    var trackedSources: Int { get }
    /// Charges a new connection from `source`, or says why the source is over its budget.
    func admit(_ source: SocketAddress, validated: Bool, now: UInt64) -> SourceLedger.Admission
    /// A connection charged with `charge` is gone.
    func release(_ charge: SourceLedger.Charge, now: UInt64)
}

/// A `SourceLedger` used by one event loop only.
package final class LocalSourceAdmission: SourceAdmission {
    private var ledger: SourceLedger

    package init(_ limits: SourceLimits) { ledger = SourceLedger(limits: limits) }

    package var trackedSources: Int { ledger.trackedSources }

    package func admit(_ source: SocketAddress, validated: Bool, now: UInt64) -> SourceLedger.Admission {
        ledger.admit(source, validated: validated, now: now)
    }

    package func release(_ charge: SourceLedger.Charge, now: UInt64) { ledger.release(charge, now: now) }
}
