import TransportCore
import TransportIO

/// QMux's output: writes wait in order for room under the connection's queued-bytes limit, the core frames them
/// and the datagrams into TLS records, and the ciphertext goes to the TCP socket as it takes it.
extension TLSStreamPump {
    /// Frames what waits (writes with room, fresh datagrams), takes the core's ciphertext and writes what the socket
    /// takes now. Ciphertext is taken only while less than `limits.pendingCiphertext` waits for the socket, and no more
    /// stream data than fills it up: the rest stays in the core, whose connection-wide limit
    /// (`limits.queuedStreamBytes`) then holds writers back. A peer that advertises large credit and never reads
    /// cannot make the relay buffer more than `TCPConnectionBudget` allows.
    func writeOutput(_ driver: QMuxConnectionDriver) {
        admitWaitingWrites(driver)
        frameDatagrams(driver.outbound)
        guard connected else { return }
        while true {
            var coreEmpty = false
            while pendingWrite.count < limits.pendingCiphertext || core.closeReason != nil {
                let room = core.closeReason == nil ? limits.pendingCiphertext - pendingWrite.count : .max
                let ciphertext = core.takeCiphertext(now: MonotonicClock.now(), streamBudget: room)
                if ciphertext.isEmpty {
                    coreEmpty = true
                    break
                }
                if pendingWrite.isEmpty {
                    pendingWrite = ciphertext  // the core's buffer, taken over: no copy, no doubled capacity
                } else {
                    pendingWrite.reserveCapacity(pendingWrite.count + ciphertext.count)
                    pendingWrite += ciphertext
                }
                if core.closeReason != nil { break }
                admitWaitingWrites(driver)  // framing made room in the core
            }
            flushSocket(driver)
            // The socket took it all and the core holds more: take it now, as no event would come for it.
            guard !coreEmpty, pendingWrite.isEmpty, core.closeReason == nil else { return }
        }
    }

    /// Drops what expired, holds back (drops, counted) while TCP's unsent queue is long, frames the rest.
    private func frameDatagrams(_ outbound: DatagramQueue) {
        guard !outbound.isEmpty else { return }
        var heldBack = 0
        for entry in outbound.takeFresh(now: MonotonicClock.now()) {
            if pendingWrite.count + socket.unsentBytes > maximumUnsent {
                heldBack += 1
            } else {
                try? core.sendDatagram(entry.payload)
            }
        }
        if heldBack > 0 { outbound.countDropped(heldBack) }
    }

    /// Queues the write behind the others; `admitWaitingWrites` moves it into the core as room allows.
    func acceptWrite(
        _ driver: QMuxConnectionDriver, stream: Int64, _ bytes: [UInt8], fin: Bool,
        _ continuation: CheckedContinuation<Void, any Error>
    ) {
        if let closeReason = core.closeReason {
            continuation.resume(throwing: closeReason.error)
            return
        }
        waitingWrites.append(WaitingWrite(stream: stream, bytes: bytes[...], fin: fin, continuation: continuation))
        driver.process()
    }

    /// Moves waiting writes into the core, in order, while the connection's queued stream bytes stay under
    /// `limits.queuedStreamBytes`; a write that does not fit goes in part and waits for room for the rest. A writer
    /// resumes once all its bytes are in the core, or with the error that refuses them.
    private func admitWaitingWrites(_ driver: QMuxConnectionDriver) {
        guard !waitingWrites.isEmpty else { return }
        waitingWrites.removeAll { write in  // the peer stopped these streams: fail them now, not in turn
            guard let refusal = driver.sinks.writeRefusal(write.stream) else { return false }
            write.continuation.resume(throwing: refusal)
            return true
        }
        while let write = waitingWrites.first {
            let room = limits.queuedStreamBytes - core.queuedStreamBytes
            guard room > 0 || write.bytes.isEmpty else { return }
            let part = write.bytes.prefix(room)
            let whole = part.count == write.bytes.count
            do {
                try core.write(stream: write.stream, Array(part), fin: write.fin && whole)
            } catch {
                waitingWrites.removeFirst()
                write.continuation.resume(throwing: error)
                continue
            }
            guard whole else {
                waitingWrites[0].bytes = write.bytes.dropFirst(part.count)
                return
            }
            waitingWrites.removeFirst()
            write.continuation.resume()
        }
    }

    /// The connection ended: every waiting writer gets its error.
    func failWaitingWrites(_ error: TransportError) {
        let writes = waitingWrites
        waitingWrites.removeAll()
        for write in writes { write.continuation.resume(throwing: error) }
    }

    /// Writes what the socket takes now; watches for room while bytes remain.
    private func flushSocket(_ driver: QMuxConnectionDriver) {
        var written = 0
        while written < pendingWrite.count {
            let result = pendingWrite.withUnsafeBytes { buffer in
                Result { () throws(TransportError) in
                    try socket.write(UnsafeRawBufferPointer(rebasing: buffer[written...]))
                }
            }
            guard case .success(let count) = result else {
                if case .failure(let error) = result {
                    core.transportEnded(now: MonotonicClock.now(), error: error)
                }
                pendingWrite.removeAll()
                driver.drainEvents()
                return
            }
            if count == 0 { break }
            written += count
        }
        if written == pendingWrite.count {
            pendingWrite = []  // all out: no capacity kept from a burst
        } else {
            pendingWrite.removeFirst(written)
        }
        let wantWritable = !pendingWrite.isEmpty
        if wantWritable != watchingWritable {
            watchingWritable = wantWritable
            loop.modify(
                fd: socket.fd, events: (readEnded ? 0 : EventLoop.readable) | (wantWritable ? EventLoop.writable : 0))
        }
    }
}
