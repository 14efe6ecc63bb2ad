/// A QMux connection (draft-ietf-quic-qmux-01): QUIC version 1 streams and datagrams carried as QUIC frames
/// in records over one reliable, ordered byte stream (TLS 1.3 over TCP here). Sans-IO: the owner feeds the
/// TLS *plaintext* it reads into `receive`, writes what `takeOutput` returns into TLS, passes the monotonic
/// time in nanoseconds, and calls `handleTimeout` at `nextTimeout`. No sockets, clock or threads.
///
/// The rules it implements, section by section, and the error each breach gets: `QMuxDraftDigest.md` beside
/// this file.
package final class QMuxConnection {
    package enum Role: Sendable { case client, server }

    static let nanosecondsPerMillisecond: UInt64 = 1_000_000
    /// The Frames size of the records we build (one full TLS record with a 2-byte Size), §5.2.
    static let preferredRecordSize = Int(QMuxTransportParameters.defaultMaxRecordSize)
    /// The longest reason phrase we put in CONNECTION_CLOSE.
    static let maxReasonLength = 1024

    let role: Role
    let localParameters: QMuxTransportParameters
    /// Set when the peer's QX_TRANSPORT_PARAMETERS has been processed.
    var peerParameters: QMuxTransportParameters?
    /// Client 0-RTT: the server's parameters from the previous connection (see the rules above).
    let rememberedPeerParameters: QMuxTransportParameters?
    /// What sending obeys: the peer's parameters, or the remembered ones until they arrive.
    var sendingParameters: QMuxTransportParameters? { peerParameters ?? rememberedPeerParameters }
    /// Send a QX_PING after this many nanoseconds without receiving anything; nil: no keep-alive.
    let keepAliveInterval: UInt64?
    /// Set once the connection is closed.
    private(set) var closeReason: QMuxCloseReason?
    var isClosed: Bool { closeReason != nil }

    // MARK: Clock (all nanoseconds, monotonic; never moves backwards)
    var now: UInt64
    var lastActivity: UInt64
    var lastReceive: UInt64

    // MARK: Input
    var reader: QMuxRecordReader

    // MARK: Output
    /// Finished records not yet taken.
    var output: [UInt8] = []
    /// Frames queued in order (RESET_STREAM, STOP_SENDING, STREAMS_BLOCKED).
    var pendingFrames: [QMuxFrame] = []
    var maxDataUpdatePending = false
    var maxStreamDataUpdates: [UInt64] = []
    var maxStreamsUpdatePending = (bidi: false, uni: false)
    var pendingPingResponse: UInt64?
    var pendingPing: UInt64?
    var pendingDatagrams: [[UInt8]] = []

    // MARK: Events
    var events = FIFOQueue<QMuxEvent>()

    // MARK: Streams
    var streams: [UInt64: QMuxStreamState] = [:]
    /// Streams with data or FIN to send, in round-robin order (no duplicates).
    var sendQueue: [UInt64] = []
    var sendQueued: Set<UInt64> = []
    /// Streams we opened, per type.
    var localOpened = (bidi: UInt64(0), uni: UInt64(0))
    /// How many streams the peer lets us open (initial_max_streams_* then MAX_STREAMS).
    var localLimit = (bidi: UInt64(0), uni: UInt64(0))
    var streamsBlockedReported = (bidi: UInt64?.none, uni: UInt64?.none)
    /// Streams the peer opened, per type.
    var peerOpened = (bidi: UInt64(0), uni: UInt64(0))
    /// How many streams we let the peer open.
    var peerLimit: (bidi: UInt64, uni: UInt64)
    /// Peer-initiated streams closed and forgotten (for MAX_STREAMS).
    var peerClosed = (bidi: UInt64(0), uni: UInt64(0))

    // MARK: Connection flow control
    /// The peer's limit on the sum of our stream offsets, and that sum.
    var sendMaxData: UInt64 = 0
    var sentData: UInt64 = 0
    var dataBlockedReportedAt: UInt64?
    /// Our advertised limit, what the peer used of it, and what our application consumed.
    var receiveMaxData: UInt64
    var receivedData: UInt64 = 0
    var consumedData: UInt64 = 0
    /// Bytes reported in `.streamData` whose consumption the application has not reported yet, per stream (no
    /// zero entries). They hold connection credit until `consumed` reports them, or until the receiving part is
    /// abandoned (`stopSending`, RESET_STREAM received), which returns them at once.
    var applicationHeld: [UInt64: UInt64] = [:]

    // MARK: QX_PING
    var nextPingSequence: UInt64 = 0
    /// The keep-alive request awaiting a response, and when it was queued.
    var keepAlivePing: (sequence: UInt64, since: UInt64)?
    /// `ping()` requests awaiting a response, ascending.
    var applicationPings: [UInt64] = []

    /// Queues our QX_TRANSPORT_PARAMETERS as the first record (§4.2). A `maxRecordSize` below 16382 is
    /// raised to 16382 (§5.2 forbids advertising less).
    package init(
        role: Role, localParameters: QMuxTransportParameters, now: UInt64, keepAliveInterval: UInt64? = nil,
        rememberedPeerParameters: QMuxTransportParameters? = nil
    ) {
        var parameters = localParameters
        parameters.maxRecordSize = max(parameters.maxRecordSize, QMuxTransportParameters.defaultMaxRecordSize)
        parameters.initialMaxStreamsBidi = min(parameters.initialMaxStreamsBidi, QMuxFrameType.maxStreamsLimit)
        parameters.initialMaxStreamsUni = min(parameters.initialMaxStreamsUni, QMuxFrameType.maxStreamsLimit)
        self.role = role
        self.localParameters = parameters
        self.keepAliveInterval = keepAliveInterval.map { max($0, 1) }
        self.now = now
        self.lastActivity = now
        self.lastReceive = now
        self.reader = QMuxRecordReader(maxRecordSize: parameters.maxRecordSize)
        self.peerLimit = (parameters.initialMaxStreamsBidi, parameters.initialMaxStreamsUni)
        self.receiveMaxData = parameters.initialMaxData
        self.rememberedPeerParameters = role == .client ? rememberedPeerParameters : nil
        if let remembered = self.rememberedPeerParameters {
            sendMaxData = remembered.initialMaxData
            localLimit = (remembered.initialMaxStreamsBidi, remembered.initialMaxStreamsUni)
        }
        QMuxRecord.encode(frames: QMuxFrame.transportParameters(parameters).encoded, into: &output)
    }

    // MARK: - Input

    /// Feeds decrypted bytes read from the transport. Partial records are buffered. On a protocol error the
    /// connection queues CONNECTION_CLOSE (0x1c, the error's code), reports `.closed(.localError)`, and throws
    /// the error. Input after the connection closed is ignored.
    package func receive(_ bytes: some Collection<UInt8>, now: UInt64) throws(QMuxError) {
        advanceClock(now)
        guard !isClosed else { return }
        reader.append(bytes)
        do throws(QMuxError) {
            while !isClosed, let record = try reader.next() {
                try process(record: record)
            }
            reader.dropConsumed()
        } catch {
            closeWithError(error)
            throw error
        }
    }

    /// The transport's read side ended (TCP FIN / TLS close_notify) without a CONNECTION_CLOSE.
    package func transportClosed(now: UInt64) {
        advanceClock(now)
        guard !isClosed else { return }
        finish(.transportClosed(midRecord: reader.bufferedCount > 0))
    }

    /// The next event, in order, or nil.
    package func nextEvent() -> QMuxEvent? { events.popFirst() }

    // MARK: - Streams

    /// Opens a bidirectional stream (client 0, 4, 8…; server 1, 5, 9…). Refused with `.streamLimitReached`
    /// before the peer's parameters arrive or when its MAX_STREAMS is used up (then STREAMS_BLOCKED is sent).
    package func openBidirectionalStream() throws(QMuxError) -> Int64 {
        try openStream(bidirectional: true)
    }

    /// Opens a unidirectional (send-only) stream (client 2, 6…; server 3, 7…).
    func openUnidirectionalStream() throws(QMuxError) -> Int64 {
        try openStream(bidirectional: false)
    }

    /// How many more bidirectional streams the peer currently allows us to open.
    var availableBidirectionalStreams: UInt64 { localLimit.bidi - localOpened.bidi }

    /// Queues `data` (and FIN) on a stream. Bytes go out as the peer's flow-control credit allows.
    package func write(stream: Int64, _ data: [UInt8], fin: Bool) throws(QMuxError) {
        try ensureOpen()
        let id = try knownStreamID(stream)
        guard var send = streams[id]?.send else {
            throw QMuxError(usage: .streamNotWritable, "stream \(stream) is receive-only here")
        }
        guard !send.isFinished && !send.finQueued else {
            throw QMuxError(usage: .streamNotWritable, "stream \(stream) already ended (FIN or RESET_STREAM)")
        }
        guard !data.isEmpty || fin else { return }
        send.enqueue(data)
        send.finQueued = fin
        streams[id]?.send = send
        markSendPending(id)
    }

    /// Bytes written to a stream and not yet emitted (waiting for credit or `takeOutput`).
    func queuedBytes(stream: Int64) -> Int {
        guard stream >= 0 else { return 0 }
        return streams[UInt64(stream)]?.send?.queuedCount ?? 0
    }

    /// Bytes written to all streams and not yet emitted: what the connection holds for the peer's credit.
    var queuedStreamBytes: Int { sendQueue.reduce(0) { $0 + (streams[$1]?.send?.queuedCount ?? 0) } }

    /// The application consumed `bytes` of a stream's data: returns credit (MAX_STREAM_DATA, MAX_DATA) once
    /// less than half of the window remains. Only bytes reported and not yet consumed or released count: once
    /// the receiving part was abandoned (`stopSending`, the peer's RESET_STREAM) its bytes' credit is already
    /// back, and reading what is left of them later returns nothing twice.
    package func consumed(stream: Int64, bytes: Int) {
        guard !isClosed, bytes > 0, stream >= 0 else { return }
        let id = UInt64(stream)
        guard let held = applicationHeld[id] else { return }
        let count = min(UInt64(bytes), held)
        applicationHeld[id] = held > count ? held - count : nil
        if var receive = streams[id]?.receive, !receive.isFinished, receive.window > 0 {
            receive.consumed = min(receive.consumed + count, receive.offset)
            if receive.maxData - receive.consumed < receive.window / 2 {
                receive.maxData = min(receive.consumed + receive.window, VarInt.max)
                if !maxStreamDataUpdates.contains(id) { maxStreamDataUpdates.append(id) }
            }
            streams[id]?.receive = receive
        }
        consumeConnectionCredit(count)
    }

    /// Abandons sending on a stream: unsent data is dropped, RESET_STREAM (final size = bytes emitted) is
    /// queued. No-op for unknown streams, receive-only streams, or once FIN/RESET_STREAM went out.
    package func resetStream(_ stream: Int64, code: UInt64) {
        guard !isClosed, stream >= 0 else { return }
        resetSending(UInt64(stream), code: min(code, VarInt.max))
    }

    /// Abandons receiving on a stream. The bytes already reported and not yet consumed are released: their
    /// connection credit returns at once (the application discards them, or reads them without `consumed`
    /// counting again). While the receiving part is open, STOP_SENDING is sent, and data still arriving is
    /// counted for flow control, credited back at once and no longer reported (RFC 9000 §3.5, §4.5). Only the
    /// release applies when the receiving part already ended (FIN or RESET_STREAM received).
    package func stopSending(_ stream: Int64, code: UInt64) {
        guard !isClosed, stream >= 0 else { return }
        let id = UInt64(stream)
        releaseHeld(id)
        guard var receive = streams[id]?.receive, !receive.isFinished, !receive.stopSendingSent else { return }
        receive.stopSendingSent = true
        streams[id]?.receive = receive
        pendingFrames.append(.stopSending(streamID: id, errorCode: min(code, VarInt.max)))
    }

    // MARK: - Datagrams

    /// The largest datagram payload `sendDatagram` accepts now (0 when DATAGRAM is not negotiated).
    var maxDatagramPayload: Int {
        guard let peer = sendingParameters, peer.maxDatagramFrameSize > 0, localParameters.maxDatagramFrameSize > 0
        else { return 0 }
        let frameLimit = Int(min(peer.maxDatagramFrameSize, peer.maxRecordSize, UInt64(Int32.max)))
        var payload = frameLimit - 1 - VarInt.encodedLength(UInt64(frameLimit))
        while payload > 0 && QMuxFrame.datagramFrameLength(payload) > frameLimit { payload -= 1 }
        return max(payload, 0)
    }

    /// Queues one DATAGRAM frame. Refused when not negotiated (both sides' max_datagram_frame_size > 0), empty,
    /// or when the frame would exceed the peer's max_datagram_frame_size or max_record_size.
    package func sendDatagram(_ data: [UInt8]) throws(QMuxError) {
        try ensureOpen()
        guard let peer = sendingParameters else {
            throw QMuxError(usage: .datagramsNotNegotiated, "the peer's transport parameters have not arrived yet")
        }
        guard peer.maxDatagramFrameSize > 0, localParameters.maxDatagramFrameSize > 0 else {
            throw QMuxError(
                usage: .datagramsNotNegotiated,
                "DATAGRAM not negotiated (max_datagram_frame_size: ours \(localParameters.maxDatagramFrameSize), peer's \(peer.maxDatagramFrameSize))"
            )
        }
        guard !data.isEmpty else { throw QMuxError(usage: .datagramEmpty, "empty datagram") }
        let frameLength = UInt64(QMuxFrame.datagramFrameLength(data.count))
        guard frameLength <= peer.maxDatagramFrameSize, frameLength <= peer.maxRecordSize else {
            throw QMuxError(
                usage: .datagramTooLarge,
                "a \(data.count)-byte datagram needs a \(frameLength)-byte DATAGRAM frame; the peer accepts \(min(peer.maxDatagramFrameSize, peer.maxRecordSize))"
            )
        }
        pendingDatagrams.append(data)
    }

    // MARK: - Ping, close, time

    /// Sends a QX_PING request now; `.pong(sequence:)` reports the response. Returns the sequence number.
    @discardableResult
    package func ping() throws(QMuxError) -> UInt64 {
        try ensureOpen()
        let sequence = takePingSequence()
        applicationPings.append(sequence)
        return sequence
    }

    /// Closes with an application error code (CONNECTION_CLOSE type 0x1d). What can be sent now (within
    /// credit) is framed first, so data written before the close precedes it. No draining (§7).
    package func close(applicationError code: UInt64, reason: String) {
        guard !isClosed else { return }
        let reasonText = Self.truncatedReason(reason)
        buildOutput()
        output.append(
            contentsOf: Self.closeRecord(
                .connectionClose(
                    errorCode: min(code, VarInt.max), frameType: nil,
                    reason: reasonText)))
        lastActivity = self.now
        finish(.localApplication(code: code, reason: reasonText))
    }

    /// The next instant `handleTimeout` must be called at, or nil.
    var nextTimeout: UInt64? {
        guard !isClosed else { return nil }
        var deadline: UInt64?
        func consider(_ instant: UInt64) { deadline = min(deadline ?? .max, instant) }
        if let idle = idleTimeout {
            consider(Self.adding(lastActivity, idle))
            if let ping = keepAlivePing { consider(Self.adding(ping.since, idle)) }
        }
        if let interval = keepAliveInterval, keepAlivePing == nil {
            consider(Self.adding(lastReceive, interval))
        }
        return deadline
    }

    /// Runs the idle timeout and keep-alive at `now`.
    package func handleTimeout(now: UInt64) {
        advanceClock(now)
        guard !isClosed else { return }
        if let idle = idleTimeout {
            let unanswered = keepAlivePing.map { self.now >= Self.adding($0.since, idle) } ?? false
            if self.now >= Self.adding(lastActivity, idle) || unanswered {
                finish(.idleTimeout)
                return
            }
        }
        if let interval = keepAliveInterval, keepAlivePing == nil, self.now >= Self.adding(lastReceive, interval) {
            keepAlivePing = (takePingSequence(), self.now)
        }
    }

    /// The effective idle timeout in nanoseconds: the smaller non-zero max_idle_timeout (QUIC §10.1).
    var idleTimeout: UInt64? {
        let values = [localParameters.maxIdleTimeout, peerParameters?.maxIdleTimeout ?? 0].filter { $0 > 0 }
        guard let milliseconds = values.min() else { return nil }
        let (product, overflow) = milliseconds.multipliedReportingOverflow(by: Self.nanosecondsPerMillisecond)
        return overflow ? .max : product
    }

    // MARK: - Helpers

    func advanceClock(_ instant: UInt64) {
        if instant > now { now = instant }
    }

    func ensureOpen() throws(QMuxError) {
        if isClosed { throw QMuxError(usage: .connectionClosed, "the connection is closed") }
    }

    func knownStreamID(_ stream: Int64) throws(QMuxError) -> UInt64 {
        guard stream >= 0, streams[UInt64(stream)] != nil else {
            throw QMuxError(usage: .unknownStream, "no open stream \(stream)")
        }
        return UInt64(stream)
    }

    func emit(_ event: QMuxEvent) {
        events.append(event)
    }

    /// Ends the connection: drops everything unsent (output already framed stays) and reports `.closed`.
    func finish(_ reason: QMuxCloseReason) {
        closeReason = reason
        pendingFrames = []
        pendingDatagrams = []
        maxStreamDataUpdates = []
        sendQueue = []
        sendQueued = []
        streams = [:]
        applicationHeld = [:]
        emit(.closed(reason))
    }

    /// A protocol error: CONNECTION_CLOSE type 0x1c with the error's code, then `.closed(.localError)`.
    func closeWithError(_ error: QMuxError) {
        guard !isClosed else { return }
        let code = error.transportCode ?? .internalError
        let reason = Self.truncatedReason(error.message)
        output.append(
            contentsOf: Self.closeRecord(
                .connectionClose(
                    errorCode: code.rawValue,
                    frameType: error.frameType, reason: reason)))
        lastActivity = now
        finish(.localError(error))
    }

    func takePingSequence() -> UInt64 {
        let sequence = nextPingSequence
        nextPingSequence += 1
        pendingPing = sequence
        return sequence
    }

    /// Returns the connection credit of a stream's bytes reported and not consumed, and stops counting them.
    func releaseHeld(_ id: UInt64) {
        guard let held = applicationHeld.removeValue(forKey: id) else { return }
        if var receive = streams[id]?.receive {
            receive.consumed = receive.offset
            streams[id]?.receive = receive
        }
        consumeConnectionCredit(held)
    }

    func consumeConnectionCredit(_ bytes: UInt64) {
        consumedData = min(consumedData + bytes, receivedData)
        let window = localParameters.initialMaxData
        if window > 0 && receiveMaxData - consumedData < window / 2 {
            receiveMaxData = min(consumedData + window, VarInt.max)
            maxDataUpdatePending = true
        }
    }

    static func adding(_ a: UInt64, _ b: UInt64) -> UInt64 {
        let (sum, overflow) = a.addingReportingOverflow(b)
        return overflow ? .max : sum
    }

    static func truncatedReason(_ reason: String) -> String {
        var length = 0
        var scalars = String.UnicodeScalarView()
        for scalar in reason.unicodeScalars {
            length += UTF8.width(scalar)
            if length > maxReasonLength { break }
            scalars.append(scalar)
        }
        return String(scalars)
    }

    static func closeRecord(_ frame: QMuxFrame) -> [UInt8] {
        var record: [UInt8] = []
        QMuxRecord.encode(frames: frame.encoded, into: &record)
        return record
    }
}
