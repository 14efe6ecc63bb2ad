internal import CNetworkEmulation
import Glibc
import TransportCore
import TransportIO

/// The kernel's own price of a UDP packet on this machine, measured in the caller's run: a tight `sendmmsg` loop
/// with nothing of ours around it. A relay's CPU per forwarded copy is judged against it.
///
/// - `loopback`: packets to `destinations` bound UDP sockets on 127.0.0.1, drained by another loop. On loopback
///   the sender's CPU also runs each packet's delivery to its receiver (the receive path).
/// - `sendOnly`: the same loop to addresses behind a TUN device nobody reads, in a private network namespace (root
///   only): the packet takes the whole send path and is discarded, as when listeners are remote. The difference is
///   the receive path.
package enum KernelSendFloor {
    /// One floor measurement.
    package struct Measurement: Sendable {
        /// CPU time of the sending thread per packet, nanoseconds.
        package var cpuNanosecondsPerPacket: Double
        package var packets: Int
    }

    /// Packets to `destinations` receiving sockets on 127.0.0.1 in `sendmmsg` batches of `batchSize`; the sender
    /// runs on a loop pinned to `senderCPU`, the receivers on one pinned to `receiverCPU` (nil: not pinned).
    package static func loopback(
        packetSize: Int, destinations: Int, packets: Int, batchSize: Int = 64, senderCPU: Int32?,
        receiverCPU: Int32?
    ) async throws -> Measurement {
        let receiverLoop = try EventLoop(name: "floor-receivers")
        defer { receiverLoop.shutdown() }
        if let receiverCPU { _ = await receiverLoop.pin(toCPU: receiverCPU) }
        let loopback = SocketAddress(host: "127.0.0.1", port: 0)!
        let addresses = try await receiverLoop.submit {
            var addresses: [SocketAddress] = []
            for _ in 0..<destinations {
                let socket = try UDPSocket(bindingTo: loopback)
                try receiverLoop.register(fd: socket.fd, events: EventLoop.readable) { _ in
                    receiverLoop.withScratchBuffer { buffer in
                        while (try? socket.receive(into: buffer)) != nil {}
                    }
                }
                addresses.append(socket.localAddress)
            }
            return addresses
        }
        let sender = try UDPSocket(bindingTo: loopback)
        return try await send(
            from: UnsafeTransfer(sender), to: addresses, packetSize: packetSize, packets: packets,
            batchSize: batchSize, cpu: senderCPU)
    }

    /// The same loop to `destinations` addresses behind an unread TUN device in a private namespace; nil when
    /// this process may not create one (not root, no TUN, or no iproute2).
    package static func sendOnly(
        packetSize: Int, destinations: Int, packets: Int, batchSize: Int = 64, senderCPU: Int32?
    ) async throws -> Measurement? {
        guard EmulatedNetwork.availability() == nil else { return nil }
        let name = "ptt-floor-\(getpid())"
        try EmulatedNetwork.ip(["netns", "add", name])
        defer { _ = try? EmulatedNetwork.ip(["netns", "del", name]) }
        // A TUN device nobody reads: the packet takes the whole send path (IP, qdisc, driver), then the device
        // drops it once its queue is full, as a NIC hands it to the wire.
        let tun = try EmulatedNetwork.openTUN(in: name, address: "10.77.0.1")
        defer { close(tun) }
        let sender = try EmulatedNetwork.withNamespace(named: name) {
            try UDPSocket(bindingTo: SocketAddress(host: "10.77.0.1", port: 0)!)
        }
        let addresses = (0..<destinations).map { index in
            SocketAddress(host: "10.77.0.2", port: UInt16(10_000 + index % 50_000))!
        }
        return try await send(
            from: UnsafeTransfer(sender), to: addresses, packetSize: packetSize, packets: packets,
            batchSize: batchSize, cpu: senderCPU)
    }

    private static func send(
        from sender: UnsafeTransfer<UDPSocket>, to addresses: [SocketAddress], packetSize: Int, packets: Int,
        batchSize: Int, cpu: Int32?
    ) async throws -> Measurement {
        let loop = try EventLoop(name: "floor-sender")
        defer { loop.shutdown() }
        if let cpu { _ = await loop.pin(toCPU: cpu) }
        let storages = addresses.map(\.kernelStorage)
        let length = addresses.first?.length ?? 0
        let (sent, nanoseconds) = try await loop.submit {
            var cpu: UInt64 = 0
            let sent = storages.withUnsafeBufferPointer { destinations in
                ptt_udp_floor_send(
                    sender.value.fd, destinations.baseAddress, length, destinations.count, packetSize, batchSize,
                    packets, &cpu)
            }
            withExtendedLifetime(sender) {}
            return (sent, cpu)
        }
        guard sent > 0 else {
            throw TransportError(.systemCallFailed, "the sendmmsg floor loop sent nothing")
        }
        return Measurement(cpuNanosecondsPerPacket: Double(nanoseconds) / Double(sent), packets: sent)
    }
}
