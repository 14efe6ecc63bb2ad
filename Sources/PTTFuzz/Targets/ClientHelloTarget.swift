import TransportCore

/// The ClientHello scan that picks a ticket key by the first PSK identity's name (TicketKeySelection).
enum ClientHelloTarget {
    /// `flights`: the first bytes our TCP client sent (TLS records); their ClientHello bodies are the seeds.
    static func make(flights: [[UInt8]]) -> ParserTarget {
        ParserTarget(name: "client-hello-key-name", seeds: flights.compactMap(clientHelloBody)) { input, _ in
            ParserProbe.clientHelloKeyName(input)
        }
    }

    /// The body of the ClientHello in the first TLS record of `flight` (record header and handshake header
    /// stripped), or nil when the flight does not start with one.
    static func clientHelloBody(_ flight: [UInt8]) -> [UInt8]? {
        guard flight.count > 9, flight[0] == 0x16, flight[5] == 0x01 else { return nil }
        let length = Int(flight[6]) << 16 | Int(flight[7]) << 8 | Int(flight[8])
        guard flight.count >= 9 + length else { return nil }
        return Array(flight[9..<(9 + length)])
    }
}
