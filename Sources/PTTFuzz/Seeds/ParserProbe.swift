import TransportCore

/// What one parser made of one input: it parsed (`accepted`), or it refused the input with its own typed error
/// (`rejected`, the error's description). A trap is neither: it ends the process, and the fuzzer counts it.
package enum ProbeOutcome: Hashable, Sendable {
    /// The parser took the input.
    case accepted
    /// The parser refused it with its typed error; the error's description.
    case rejected(String)
}

/// Entry points into the core's internal parsers, for `ptt-lab fuzz` and its tests: each feeds bytes to
/// exactly the code the transport runs on bytes from the network or from disk, catches that parser's typed
/// error, and reports a `ProbeOutcome`. Nothing here changes how the parsers behave.
package enum ParserProbe {
    /// `QMuxRecordReader` then `QMuxFrame.parseAll` on every complete record, with the default
    /// max_record_size; bytes are appended in two pieces split at `split` (clamped) to exercise reassembly.
    package static func qmuxRecords(_ bytes: [UInt8], split: Int) -> ProbeOutcome {
        var reader = QMuxRecordReader(maxRecordSize: QMuxTransportParameters.defaultMaxRecordSize)
        let cut = min(max(split, 0), bytes.count)
        do throws(QMuxError) {
            for piece in [bytes[..<cut], bytes[cut...]] {
                reader.append(piece)
                while let record = try reader.next() { _ = try QMuxFrame.parseAll(record) }
            }
            return .accepted
        } catch {
            return .rejected(error.description)
        }
    }

    /// `QMuxFrame.parse` repeatedly over `bytes` as one record's Frames field.
    package static func qmuxFrames(_ bytes: [UInt8]) -> ProbeOutcome {
        do throws(QMuxError) {
            _ = try QMuxFrame.parseAll(bytes[...])
            return .accepted
        } catch {
            return .rejected(error.description)
        }
    }

    /// `QMuxTransportParameters.decode` on a QX_TRANSPORT_PARAMETERS payload; an accepted payload is re-encoded
    /// and decoded again (the encoder must take whatever the decoder produced).
    package static func qmuxTransportParameters(_ bytes: [UInt8]) -> ProbeOutcome {
        do throws(QMuxError) {
            let decoded = try QMuxTransportParameters.decode(bytes[...])
            _ = try QMuxTransportParameters.decode(decoded.encode()[...])
            return .accepted
        } catch {
            return .rejected(error.description)
        }
    }

    /// `VarInt.decode` at every offset of `bytes`; each decoded value is re-encoded (the encoder traps on values
    /// above 2^62-1, which a decoder can never produce).
    package static func varInts(_ bytes: [UInt8]) -> ProbeOutcome {
        var index = 0
        var decoded = 0
        while index < bytes.count {
            if let (value, length) = VarInt.decode(bytes, at: index) {
                var out: [UInt8] = []
                VarInt.encode(value, into: &out)
                decoded += 1
                index += length
            } else {
                index += 1
            }
        }
        return decoded > 0 ? .accepted : .rejected("no complete variable-length integer")
    }

    /// A `QMuxConnection` (server role, or a 0-RTT client that opened streams 0 and 4 under remembered
    /// parameters when `asClient`) fed `bytes` as decrypted stream plaintext
    /// in pieces of `chunk` bytes (at least 1). Events are drained, stream data is consumed and echoed, output is
    /// taken, then the idle timer fires and the transport ends, as the driver would do.
    package static func qmuxConnection(_ bytes: [UInt8], chunk: Int, asClient: Bool) -> ProbeOutcome {
        let connection = QMuxConnection(
            role: asClient ? .client : .server, localParameters: probeParameters,
            now: 1_000_000, rememberedPeerParameters: probeParameters)
        if asClient {  // a 0-RTT client (remembered parameters): streams 0 and 4 exist before the server speaks
            for _ in 0..<2 {
                if let stream = try? connection.openBidirectionalStream() {
                    try? connection.write(stream: stream, Array("probe".utf8), fin: false)
                }
            }
        }
        var now: UInt64 = 1_000_000
        let step = max(chunk, 1)
        var offset = 0
        do throws(QMuxError) {
            while offset < bytes.count {
                let end = min(offset + step, bytes.count)
                now += 1_000
                try connection.receive(bytes[offset..<end], now: now)
                drain(connection)
                _ = connection.takeOutput(now: now)
                offset = end
            }
        } catch {
            connection.handleTimeout(now: now &+ 60_000_000_000)
            return .rejected(error.description)
        }
        connection.handleTimeout(now: now + 60_000_000_000)
        connection.transportClosed(now: now + 60_000_000_001)
        drain(connection)
        return .accepted
    }

    /// `TicketKeySelection.firstPSKIdentityPrefix` on a ClientHello body (the handshake message without its
    /// 4-byte header): accepted when it finds a 16-byte ticket key name.
    package static func clientHelloKeyName(_ body: [UInt8]) -> ProbeOutcome {
        let prefix = body.withUnsafeBytes { TicketKeySelection.firstPSKIdentityPrefix(clientHello: $0) }
        guard let prefix else { return .rejected("no pre_shared_key identity") }
        return prefix.count == TicketKeySelection.keyNameSize ? .accepted : .rejected("short key name")
    }

    /// The parameters of the connection `qmuxConnection` builds (and of the seed conversation).
    static let probeParameters = QMuxTransportParameters(
        maxIdleTimeout: 30_000, initialMaxData: 1 << 20, initialMaxStreamDataBidiLocal: 64 * 1024,
        initialMaxStreamDataBidiRemote: 64 * 1024, initialMaxStreamDataUni: 64 * 1024, initialMaxStreamsBidi: 16,
        initialMaxStreamsUni: 4, maxDatagramFrameSize: 1200)

    private static func drain(_ connection: QMuxConnection) {
        while let event = connection.nextEvent() {
            if case .streamData(let stream, let data, let fin) = event {
                connection.consumed(stream: stream, bytes: data.count)
                if stream & 0x02 == 0 { try? connection.write(stream: stream, data, fin: fin) }
            }
        }
    }
}
