import TransportCore

extension QUICConnection {
    /// An echo relay's answer to one of its events: stream bytes (and FIN) back on the same stream with the credit
    /// renewed, datagrams back. For in-memory peers (the handshake floor, tests).
    package func echo(_ event: QUICEvent) {
        switch event {
        case .streamData(let id, let bytes, let fin, _):
            try? write(stream: id, bytes, fin: fin)
            extendCredit(stream: id, by: bytes.count)
        case .datagram(let bytes, _):
            try? sendDatagram(bytes)
        default:
            break
        }
    }

    /// Writes every packet the connection has to send now (its CONNECTION_CLOSE first, when closing) into
    /// `buffer`, hands each to `emit`, then ends the write burst.
    package func drainPackets(
        into buffer: UnsafeMutableRawBufferPointer, now: UInt64, _ emit: (UnsafeRawBufferPointer) -> Void
    ) {
        if let close = takeClosePacket() { close.bytes.withUnsafeBytes { emit($0) } }
        while true {
            let length = writePacket(into: buffer, now: now).length
            if length == 0 { break }
            emit(UnsafeRawBufferPointer(rebasing: buffer[..<length]))
        }
        finishWriteBurst(now: now)
    }
}
