import TransportCore
import TransportIO

/// The QMux driver's output pump: writes wait in order for room under the connection's queued-bytes limit, the
/// core frames them into TLS records, and the ciphertext goes to the TCP socket as it takes it.
extension QMuxConnectionDriver {
    /// Queues the write behind the others; `admitWaitingWrites` moves it into the core as room allows.
    func acceptWrite(
        stream: Int64, _ bytes: [UInt8], fin: Bool, _ continuation: CheckedContinuation<Void, any Error>
    ) {
        if let closeReason = core.closeReason {
            continuation.resume(throwing: closeReason.error)
            return
        }
        waitingWrites.append(WaitingWrite(stream: stream, bytes: bytes[...], fin: fin, continuation: continuation))
        process()
    }

    /// Moves waiting writes into the core, in order, while the connection's queued stream bytes stay under
    /// `maximumQueuedStreamBytes`; a write that does not fit goes in part and waits for room for the rest. A writer
    /// resumes once all its bytes are in the core, or with the error that refuses them.
    func admitWaitingWrites() {
        guard !waitingWrites.isEmpty else { return }
        waitingWrites.removeAll { write in  // the peer stopped these streams: fail them now, not in turn
            guard let refusal = sinks.writeRefusal(write.stream) else { return false }
            write.continuation.resume(throwing: refusal)
            return true
        }
        while let write = waitingWrites.first {
            let room = Self.maximumQueuedStreamBytes - core.queuedStreamBytes
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
    func flushSocket() {
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
                drainEvents()
                return
            }
            if count == 0 { break }
            written += count
        }
        pendingWrite.removeFirst(written)
        let wantWritable = !pendingWrite.isEmpty
        if wantWritable != watchingWritable {
            watchingWritable = wantWritable
            loop.modify(fd: socket.fd, events: EventLoop.readable | (wantWritable ? EventLoop.writable : 0))
        }
    }
}
