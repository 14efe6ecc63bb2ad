import TransportCore

/// The QMux parsers: records, frames, transport parameters, and whole connections fed a byte stream.
enum QMuxTargets {
    static func all() -> [ParserTarget] {
        let conversation = ParserSeeds.qmuxConversation
        return [
            ParserTarget(name: "qmux-records", seeds: ParserSeeds.qmuxRecords + [conversation.clientToServer]) {
                input, random in ParserProbe.qmuxRecords(input, split: random.below(input.count + 1))
            },
            ParserTarget(name: "qmux-frames", seeds: ParserSeeds.qmuxFrames) { input, _ in
                ParserProbe.qmuxFrames(input)
            },
            ParserTarget(name: "qmux-transport-parameters", seeds: ParserSeeds.qmuxTransportParameters) {
                input, _ in ParserProbe.qmuxTransportParameters(input)
            },
            ParserTarget(name: "qmux-connection-server", seeds: [conversation.clientToServer], weight: 2) {
                input, random in
                ParserProbe.qmuxConnection(input, chunk: 1 + random.below(input.count + 1), asClient: false)
            },
            ParserTarget(name: "qmux-connection-client", seeds: [conversation.serverToClient], weight: 2) {
                input, random in
                ParserProbe.qmuxConnection(input, chunk: 1 + random.below(input.count + 1), asClient: true)
            },
        ]
    }
}
