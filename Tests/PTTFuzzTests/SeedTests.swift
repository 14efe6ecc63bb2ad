import Testing
import TransportCore

@testable import PTTFuzz

/// The seeds are valid: each parser accepts every seed it starts from (otherwise mutations start from noise).
@Suite struct SeedTests {
    @Test func everyQMuxAndWireSeedIsAccepted() {
        for target in QMuxTargets.all() + WireTargets.all() + ResumptionTargets.all(captured: []) {
            #expect(!target.seeds.isEmpty, "\(target.name) has no seeds")
            for seed in target.seeds {
                var random = FuzzRandom(seed: 1)
                // Resumption targets fix the checksum of half their inputs; the seeds are valid either way.
                let outcome = target.feed(seed, &random)
                if target.name == "socket-address" || target.name == "server-address" {
                    continue  // a host name and a bare "::1" are deliberately among the address seeds
                }
                #expect(outcome == .accepted, "\(target.name) rejected its seed: \(outcome)")
            }
        }
    }

    @Test func theConversationFeedsBothRolesCleanly() {
        let conversation = ParserSeeds.qmuxConversation
        #expect(conversation.clientToServer.count > 300)
        #expect(ParserProbe.qmuxConnection(conversation.clientToServer, chunk: 7, asClient: false) == .accepted)
        #expect(ParserProbe.qmuxConnection(conversation.serverToClient, chunk: 1, asClient: true) == .accepted)
    }

    @Test func clientHelloBodyIsFoundInATLSRecord() {
        let body: [UInt8] = [0x03, 0x03] + [UInt8](repeating: 7, count: 40)
        let record: [UInt8] =
            [0x16, 0x03, 0x01, 0x00, UInt8(body.count + 4), 0x01, 0x00, 0x00, UInt8(body.count)]
            + body
        #expect(ClientHelloTarget.clientHelloBody(record) == body)
        #expect(ClientHelloTarget.clientHelloBody(Array(record.dropLast())) == nil)
        #expect(ClientHelloTarget.clientHelloBody([0x17] + record.dropFirst()) == nil)
    }

    @Test func aFixedChecksumMakesAMutatedBlobPassTheCorruptionCheck() {
        var blob = ResumptionTargets.blobSeeds[0]
        blob[10] ^= 0x01
        #expect(ResumptionTargets.withValidChecksum(blob).dropLast(4) == blob.dropLast(4))
        #expect(ResumptionTargets.withValidChecksum(ResumptionTargets.blobSeeds[1]) == ResumptionTargets.blobSeeds[1])
    }

    @Test func theBudgetGivesEveryTargetInputsAndAddsUp() {
        let budget = FuzzBudget(iterations: 1_000_000, weights: [1, 2, 1], withCLI: true)
        #expect(budget.relayUDP == 20_000 && budget.relayTCP == 5_000 && budget.relayQMux == 5_000 && budget.cli == 150)
        #expect(budget.parsers.allSatisfy { $0 > 0 })
        #expect(abs(budget.parsers[1] - 2 * budget.parsers[0]) <= 1)
        #expect(budget.redisClient == 1000)
        let total =
            budget.parsers.reduce(0, +) + budget.relayUDP + budget.relayTCP + budget.relayQMux + budget.cli
            + budget.redisClient
        #expect(total == 1_000_000)  // rounding leftovers go to the first parser target
        #expect(FuzzBudget(iterations: 2000, weights: [1, 1], withCLI: false).cli == 0)
    }
}
