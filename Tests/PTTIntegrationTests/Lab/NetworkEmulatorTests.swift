import Glibc
import TestSupport
import Testing
import TransportCore
import TransportIO

@testable import NetworkEmulation

/// Probed once per test process; the reason is what a skipped run reports.
let emulationAvailability = EmulatedNetwork.isAvailable()

@Suite(
    "Emulated network (namespaces, TUN, delay line)", .serialized,
    .enabled(if: emulationAvailability.0, Comment(rawValue: "emulation unavailable: \(emulationAvailability.1)")),
    .integration)
struct NetworkEmulatorTests {
    @Test func udpEchoTakesAtLeastTheRTTAndClosingRemovesTheNamespaces() throws {
        let network = try EmulatedNetwork.create(rtt: .milliseconds(20), loss: 0, seed: 1)
        let namespaces = [network.clientNamespace, network.serverNamespace]
        #expect(namespaces.allSatisfy(Self.namespaceExists))
        #expect(network.clientAddress == "198.18.0.1" && network.serverAddress == "198.18.0.2")

        let outside = Self.currentNamespaceInode()
        let server = try network.withNamespace(.server) {
            #expect(Self.currentNamespaceInode() != outside)
            return try Self.udpSocket(bindTo: network.serverAddress)
        }
        #expect(Self.currentNamespaceInode() == outside, "withNamespace moves the thread back")
        defer { close(server.fd) }
        let client = try network.withNamespace(.client) { try Self.udpSocket(bindTo: nil) }
        defer { close(client.fd) }

        var rtts: [Double] = []
        for round in 0..<5 {
            let start = Self.nowMilliseconds()
            try Self.send([UInt8(round)], from: client.fd, to: network.serverAddress, port: server.port)
            let (request, peer) = try #require(Self.receive(server.fd, timeoutMilliseconds: 1_000))
            #expect(request == [UInt8(round)])
            var reply = peer
            let echoed = withUnsafePointer(to: &reply) {
                sendto(
                    server.fd, request, request.count, 0, UnsafeRawPointer($0).assumingMemoryBound(to: sockaddr.self),
                    socklen_t(MemoryLayout<sockaddr_in>.size))
            }
            #expect(echoed == request.count)
            let (echo, _) = try #require(Self.receive(client.fd, timeoutMilliseconds: 1_000))
            #expect(echo == [UInt8(round)])
            rtts.append(Self.nowMilliseconds() - start)
        }
        for rtt in rtts {
            #expect(rtt >= 20 && rtt < 1_000, "echo round trip \(rtt) ms through a 20 ms path")
        }

        network.close()
        #expect(!namespaces.contains(where: Self.namespaceExists), "close() deletes both namespaces")
        network.close()  // idempotent
    }

    /// A change of `dropUDP` applies to the next packet sent, even while the pump thread sleeps in poll.
    @Test func aLoopStartedInsideANamespaceOpensItsSocketsThereButItsThreadStaysOut() async throws {
        let network = try EmulatedNetwork.create(rtt: .milliseconds(2), loss: 0, seed: 1)
        defer { network.close() }
        let outside = Self.currentNamespaceInode()
        let loop = try network.withNamespace(.server) { try EventLoop(name: "namespace-check") }
        defer { loop.shutdown() }
        let (threadNamespace, boundThere) = try await loop.submit {
            // 198.18.0.2 exists only on the server side of the path: binding it proves where the socket lives.
            let socket = try? UDPSocket(bindingTo: SocketAddress(host: network.serverAddress, port: 0)!)
            defer { socket?.close() }
            return (Self.currentNamespaceInode(), socket != nil)
        }
        #expect(boundThere, "the loop's sockets are in the server namespace")
        // Otherwise every thread the loop's thread starts (the concurrency runtime's workers) would be in the
        // emulated network too, and sockets or child processes made there later would miss loopback servers.
        #expect(threadNamespace == outside, "the loop's thread itself is back in the caller's namespace")
        #expect(Self.currentNamespaceInode() == outside)
    }

    @Test func dropUDPAppliesFromTheNextPacketOn() throws {
        try Self.withSockets(rtt: .milliseconds(10)) { network, server, client in
            for round in 0..<3 {
                Self.sleepMilliseconds(30)  // let the pump go idle in poll
                network.dropUDP = true
                #expect(network.dropUDP)
                try Self.send([UInt8(round)], from: client.fd, to: network.serverAddress, port: server.port)
                #expect(Self.receive(server.fd, timeoutMilliseconds: 100) == nil, "UDP is blocked (round \(round))")
                Self.sleepMilliseconds(30)
                network.dropUDP = false
                #expect(!network.dropUDP)
                try Self.send([UInt8(100 + round)], from: client.fd, to: network.serverAddress, port: server.port)
                #expect(
                    Self.receive(server.fd, timeoutMilliseconds: 1_000)?.0 == [UInt8(100 + round)],
                    "and unblocked again (round \(round))")
            }
        }
    }

    @Test func tcpStillConnectsWhenUDPIsBlocked() throws {
        let network = try EmulatedNetwork.create(rtt: .milliseconds(20))
        defer { network.close() }
        network.dropUDP = true
        let listener = try network.withNamespace(.server) { () throws -> Int32 in
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            var address = Self.address(network.serverAddress, port: 0)
            try #require(
                withUnsafePointer(to: &address) {
                    bind(
                        fd, UnsafeRawPointer($0).assumingMemoryBound(to: sockaddr.self),
                        socklen_t(MemoryLayout<sockaddr_in>.size))
                } == 0)
            try #require(listen(fd, 4) == 0)
            return fd
        }
        defer { close(listener) }
        let port = Self.localPort(listener)
        let client = try network.withNamespace(.client) {
            socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        }
        defer { close(client) }
        var address = Self.address(network.serverAddress, port: port)
        let start = Self.nowMilliseconds()
        let connected = withUnsafePointer(to: &address) {
            connect(
                client, UnsafeRawPointer($0).assumingMemoryBound(to: sockaddr.self),
                socklen_t(MemoryLayout<sockaddr_in>.size))
        }
        let elapsed = Self.nowMilliseconds() - start
        #expect(connected == 0, "connect: \(String(cString: strerror(errno)))")
        #expect(elapsed >= 20 && elapsed < 1_000, "TCP handshake (SYN / SYN-ACK) took \(elapsed) ms")
    }

    @Test func removingStaleNamespacesSparesLiveProcesses() throws {
        let network = try EmulatedNetwork.create(rtt: .milliseconds(2))
        defer { network.close() }
        let deleted = EmulatedNetwork.removeNamespacesOfExitedProcesses()
        #expect(!deleted.contains(network.clientNamespace) && !deleted.contains(network.serverNamespace))
        #expect(Self.namespaceExists(network.clientNamespace) && Self.namespaceExists(network.serverNamespace))
        // Other suites of this test process may hold networks of their own at the same time.
        #expect(
            Set(EmulatedNetwork.namespacesOfThisProcess()).isSuperset(of: [
                network.clientNamespace,
                network.serverNamespace,
            ]))
    }

    // MARK: - Plain socket helpers

    /// A path of `rtt` with a UDP socket bound on the server side and an unbound one on the client side, all
    /// closed after `body`.
    static func withSockets(
        rtt: Duration,
        _ body: (EmulatedNetwork, _ server: (fd: Int32, port: UInt16), _ client: (fd: Int32, port: UInt16)) throws
            -> Void
    ) throws {
        let network = try EmulatedNetwork.create(rtt: rtt)
        defer { network.close() }
        let server = try network.withNamespace(.server) { try udpSocket(bindTo: network.serverAddress) }
        defer { close(server.fd) }
        let client = try network.withNamespace(.client) { try udpSocket(bindTo: nil) }
        defer { close(client.fd) }
        try body(network, server, client)
    }

    static func sleepMilliseconds(_ milliseconds: UInt32) { usleep(milliseconds * 1_000) }

    static func namespaceExists(_ name: String) -> Bool { access("/var/run/netns/\(name)", F_OK) == 0 }

    static func currentNamespaceInode() -> UInt {
        var info = stat()
        return stat("/proc/thread-self/ns/net", &info) == 0 ? UInt(info.st_ino) : 0
    }

    static func nowMilliseconds() -> Double { Double(MonotonicClock.now()) / 1_000_000 }

    static func address(_ host: String, port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        _ = inet_pton(AF_INET, host, &address.sin_addr)
        return address
    }

    static func localPort(_ fd: Int32) -> UInt16 {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            getsockname(fd, UnsafeMutableRawPointer($0).assumingMemoryBound(to: sockaddr.self), &length)
        }
        return UInt16(bigEndian: address.sin_port)
    }

    /// A UDP socket bound to `host` (any port), or unbound.
    static func udpSocket(bindTo host: String?) throws -> (fd: Int32, port: UInt16) {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        try #require(fd >= 0)
        if let host {
            var address = address(host, port: 0)
            let bound = withUnsafePointer(to: &address) {
                bind(
                    fd, UnsafeRawPointer($0).assumingMemoryBound(to: sockaddr.self),
                    socklen_t(MemoryLayout<sockaddr_in>.size))
            }
            try #require(bound == 0, "bind \(host): \(String(cString: strerror(errno)))")
        }
        return (fd, localPort(fd))
    }

    static func send(_ bytes: [UInt8], from fd: Int32, to host: String, port: UInt16) throws {
        var address = address(host, port: port)
        let sent = withUnsafePointer(to: &address) {
            sendto(
                fd, bytes, bytes.count, 0, UnsafeRawPointer($0).assumingMemoryBound(to: sockaddr.self),
                socklen_t(MemoryLayout<sockaddr_in>.size))
        }
        try #require(sent == bytes.count, "sendto: \(String(cString: strerror(errno)))")
    }

    /// One datagram and its sender, or nil after `timeoutMilliseconds`.
    static func receive(_ fd: Int32, timeoutMilliseconds: Int32) -> ([UInt8], sockaddr_in)? {
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, timeoutMilliseconds) == 1 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 2048)
        var peer = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let n = withUnsafeMutablePointer(to: &peer) {
            recvfrom(
                fd, &buffer, buffer.count, 0, UnsafeMutableRawPointer($0).assumingMemoryBound(to: sockaddr.self),
                &length)
        }
        return n >= 0 ? (Array(buffer.prefix(n)), peer) : nil
    }
}

@Suite("Emulated network availability", .integration)
struct NetworkEmulatorAvailabilityTests {
    @Test func availabilityAlwaysGivesAReason() {
        let (available, reason) = EmulatedNetwork.isAvailable()
        #expect(!reason.isEmpty)
        if available {
            #expect(EmulatedNetwork.availability() == nil, "the thorough probe never claims more than the quick check")
        }
    }
}
