import TransportCore

/// What only a ticket's holder can do to it (issue 31, item 3): append bytes after the ticket's MAC in its saved
/// session. GnuTLS ignores them when it opens the ticket, and the client's binder covers the ClientHello it sends,
/// so the server resumes the session as if they were not there.
enum TicketTamper {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// A `connect --session-file` state with `extra` appended to its ticket for `transport` ("quic" or "tcp"), saved
    /// for the relay on `port` (the state names the relay it was saved against; another relay of the fleet on the
    /// same host takes the same ticket).
    static func appending(
        _ extra: [UInt8], toTicketInSession file: [UInt8], transport: String, port: UInt16? = nil
    ) throws -> [UInt8] {
        var blob = try ResumptionBlob(decoding: file)
        if let port { blob.port = port }
        if transport == "tcp" {
            blob.tcpTicket = try appending(extra, toTicketIn: blob.tcpTicket)
        } else {
            blob.quicTicket = try appending(extra, toTicketIn: blob.quicTicket)
        }
        return blob.encoded()
    }

    /// A `connect --session-file` state saved against one relay, made the state of the relay on `port` (the fleet's
    /// relays on one host share the ticket key; a state is offered only to the port it names).
    static func retargeted(_ file: [UInt8], toPort port: UInt16) throws -> [UInt8] {
        var blob = try ResumptionBlob(decoding: file)
        blob.port = port
        return blob.encoded()
    }

    /// GnuTLS 3.7.9's packed session data (`gnutls_session_get_data2`) with `extra` after its TLS 1.3 ticket. The
    /// TLS 1.3 part (lib/session_pack.c) is: total length (4), lifetime (4), age_add (4), nonce<1>, ticket<4>,
    /// resumption master secret<1>, arrival time (12), max early data (4); the ticket is key_name (16), IV (16),
    /// state length (2), state, MAC (20). The ticket is found by that shape, and both lengths grow by `extra`.
    static func appending(_ extra: [UInt8], toTicketIn data: [UInt8]) throws -> [UInt8] {
        func number(at index: Int) -> Int { data[index..<(index + 4)].reduce(0) { $0 << 8 | Int($1) } }
        func bytes(_ value: Int) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: value >> (24 - 8 * $0)) } }
        for lengthAt in 13..<max(13, data.count - 4) {
            let length = number(at: lengthAt)
            let ticketAt = lengthAt + 4
            guard length >= 54, ticketAt + length < data.count,
                Int(data[ticketAt + 32]) << 8 | Int(data[ticketAt + 33]) == length - 54
            else { continue }
            let secretLength = Int(data[ticketAt + length])
            for nonce in 0...255 {
                let nonceLengthAt = lengthAt - 1 - nonce
                let totalAt = nonceLengthAt - 12
                guard totalAt >= 0 else { break }
                let total = 4 + 4 + 1 + nonce + 4 + length + 1 + secretLength + 12 + 4
                guard Int(data[nonceLengthAt]) == nonce, number(at: totalAt) == total else { continue }
                return Array(data[..<totalAt]) + bytes(total + extra.count) + data[(totalAt + 4)..<lengthAt]
                    + bytes(length + extra.count) + data[ticketAt..<(ticketAt + length)] + extra
                    + data[(ticketAt + length)...]
            }
        }
        throw Failure(description: "no TLS 1.3 ticket found in \(data.count) bytes of session data")
    }
}
