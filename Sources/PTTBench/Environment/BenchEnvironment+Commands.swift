import Glibc

extension BenchEnvironment {
    /// How to run a program on the relay's side of the path: as is on loopback; through
    /// `ip netns exec <server namespace>` on an emulated path, so its sockets are in the server namespace.
    func serverSideCommand(_ executable: String, _ arguments: [String]) -> (executable: String, arguments: [String]) {
        guard let network else { return (executable, arguments) }
        let ip = access("/usr/sbin/ip", X_OK) == 0 ? "/usr/sbin/ip" : "/sbin/ip"
        return (ip, ["netns", "exec", network.serverNamespace, executable] + arguments)
    }
}
