import TransportCore
import TransportIO

/// QUIC's output: ngtcp2's packets into the loop's UDP send batch (one GSO flush per turn), paced
/// by ngtcp2's burst limit, waiting for room when the socket buffer is full, and across a migration's two paths.
extension UDPPacketPump {
    /// Writes the packets ngtcp2 has ready (up to one burst) into the loop's send batch, in place.
    func writeOutput(_ driver: QUICConnectionDriver) {
        if isClient && (migration != nil || retiredSocket != nil) { return flushAcrossPaths(driver) }
        let now = MonotonicClock.now()
        if let close = core.takeClosePacket() {
            // A server sends its close where `ClosingAnswers` chose (never the current path just because a
            // spoofed packet moved it there).
            let to = isClient ? nil : (close.remote.length > 0 ? close.remote : destination)
            close.bytes.withUnsafeBytes { _ = sender.enqueue($0, to: to, from: local, ecn: 0) }
        }
        let limit = core.burstPacketLimit
        let capacity = core.parameters.maxUDPPayloadSize
        var sent = 0
        var outOfRoom = false
        while sent < limit {
            let written = sender.write(capacity: capacity, from: local) { buffer in
                let (length, ecn) = core.writePacket(into: buffer, now: now)
                return (length, ecn, length > 0 ? destination : nil)
            }
            guard let written else {
                outOfRoom = true
                break
            }
            if written == 0 { break }
            sent += 1
        }
        if sent > 0 { core.finishWriteBurst(now: now) }  // nothing written: ngtcp2's pacing has nothing to account
        if outOfRoom {
            waitForRoom(driver)
        } else if sent == limit {
            driver.processSoon()  // more may be pending: continue after other work
        }
    }

    /// Where the next packet goes: a client's connected socket needs none; a server sends each packet to the
    /// address ngtcp2 chose for it, the peer's current one after a NAT rebinding (ngtcp2 validates the new path,
    /// within the anti-amplification limit, before it moves there).
    var destination: SocketAddress? {
        guard !isClient else { return nil }
        let chosen = core.packetRemote
        return chosen.length > 0 ? chosen : remote
    }

    /// Resumes writing once the send batch has room (the socket buffer was full): nothing ngtcp2 holds is lost.
    private func waitForRoom(_ driver: QUICConnectionDriver) {
        guard !waitingForRoom else { return }
        waitingForRoom = true
        // Strong: the batch drops the closure once it ran (a weak reference would give every driver a side table
        // and slow each retain of it).
        sender.whenRoom { [self] in
            waitingForRoom = false
            driver.process()
        }
    }

    /// Client with more than one path open (a migration validating its new path, or the path just left still
    /// read): each packet leaves at once from the socket of its path — a migration's PATH_CHALLENGE from the new
    /// one, an answer on the path just left from the old one, the rest from the current one. What the batch
    /// already holds goes first. This lasts a few round trips per migration.
    private func flushAcrossPaths(_ driver: QUICConnectionDriver) {
        sender.flush()
        let now = MonotonicClock.now()
        loop.withScratchBuffer { buffer in
            if let close = core.takeClosePacket() {
                _ = close.bytes.withUnsafeBytes { socket.send($0, to: nil, from: nil, ecn: 0) }
            }
            let limit = core.burstPacketLimit
            var sent = 0
            while sent < limit {
                let (length, ecn) = core.writePacket(into: buffer, now: now)
                if length == 0 { break }
                let packet = UnsafeRawBufferPointer(rebasing: buffer[..<length])
                clientSocket(for: core.packetLocal).send(packet, to: nil, from: nil, ecn: ecn)
                sent += 1
            }
            core.finishWriteBurst(now: now)
            if sent == limit { driver.processSoon() }  // more may be pending: continue after other work
        }
    }
}
