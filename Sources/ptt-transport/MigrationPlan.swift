import CommandLineSupport
import PTTTransport

/// `connect --migrate-after N --migrate-to ADDRESS[:PORT]`: move the connection to another local address once N
/// datagrams went out, so a user can watch a client migration (the JSON lists the `paths` used).
struct MigrationPlan {
    let afterDatagrams: Int
    let endpoint: LocalEndpoint

    /// nil when neither option is given; a usage error when only one is or a value is bad.
    init?(_ args: Arguments, datagrams: Int) throws {
        guard let text = args.value("migrate-to") else {
            if args.value("migrate-after") != nil {
                throw Arguments.Failure(description: "--migrate-after needs --migrate-to ADDRESS")
            }
            return nil
        }
        guard let endpoint = LocalEndpoint(text) else {
            throw Arguments.Failure(description: "--migrate-to \(text): expected a numeric ADDRESS or ADDRESS:PORT")
        }
        self.endpoint = endpoint
        afterDatagrams = try args.integer("migrate-after", default: 0)
        guard afterDatagrams < datagrams else {
            throw Arguments.Failure(
                description: "--migrate-after \(afterDatagrams) needs more --datagrams than that (\(datagrams) now)")
        }
    }

    /// Waits until `afterDatagrams` datagrams were sent, migrates, and returns the new local address.
    func run(on connection: TransportConnection) async throws -> String {
        while await connection.statistics().datagramsSent < UInt64(afterDatagrams) {
            try await Task.sleep(for: .milliseconds(1))
        }
        return try await connection.migrate(to: endpoint, waitingUpTo: .seconds(2))
    }
}
