internal import CTransportShims
import Glibc
import TransportCore

/// One UDP socket per event loop, all bound to one address in an SO_REUSEPORT group, and how the kernel picks
/// the socket (so the loop) for each datagram: a classic-BPF program reading the loop index from the packet's
/// destination connection ID (`ConnectionIDSteering`), or, when the kernel refuses the program or the probe
/// finds it misrouting, the kernel's 4-tuple hash (the receiving loop then forwards what belongs to another).
package enum ReuseportGroup {
    /// How packets of an established connection reach the loop that owns it.
    package enum Steering: String, Sendable {
        /// One loop: nothing to steer.
        case single
        /// The kernel's steering program delivers each packet to its loop's socket.
        case kernelProgram = "bpf"
        /// The kernel hashes the 4-tuple; a loop hands a packet for another loop's connection over to it.
        case forwarding = "forwarder"
    }

    /// Binds `count` sockets to `address`, in loop order (the group's socket index is the order of binding).
    /// Port 0 picks a free port first with a plain bind, and an explicit port is tried the same way, so a port
    /// held by anyone (another group of this process included) fails with `systemCallFailed` (address in use).
    ///
    /// With port 0 another socket may take the free port between the plain bind and the group's binds (any
    /// process's ephemeral bind): the group then tries another free port, up to 16 times.
    package static func bind(_ address: SocketAddress, count: Int) throws(TransportError) -> [UDPSocket] {
        var attempt = 0
        while true {
            attempt += 1
            let probe = try UDPSocket(bindingTo: address)
            let port = probe.localAddress.port
            probe.close()
            var sockets: [UDPSocket] = []
            do throws(TransportError) {
                for _ in 0..<count {
                    sockets.append(try UDPSocket(bindingTo: address.with(port: port), reusePort: true))
                }
                return sockets
            } catch {
                for socket in sockets { socket.close() }
                guard address.port == 0, error.libraryCode == Int(EADDRINUSE), attempt < 16 else { throw error }
            }
        }
    }

    /// Attaches the steering program to the group of `sockets` (bound by `bind`, in loop order) and checks with
    /// one probe per loop, sent over loopback, that each arrives on its loop's socket. Call before the loops
    /// read the sockets (the probes are read and discarded here). `useProgram` false skips the program (tests of
    /// the forwarding fallback). With an encrypted QUIC-LB configuration the program cannot read the loop index
    /// (`ConnectionIDIssuer.kernelLoopByteOffset`): the loops forward.
    ///
    /// `newConnections` (a range of socket indices) sends the packets that start a connection — Initial and 0-RTT
    /// packets, and any of a version the program does not know — to those sockets only, by the loop byte of
    /// their client-chosen ID, instead of the kernel's hash over the whole group: the supervisor of `--workers`
    /// binds a second set of sockets for an upgrade's new generation of workers and moves new connections there
    /// (`steerNewConnections`) while the old generation's connections stay steered to their own sockets.
    package static func steer(
        _ sockets: [UDPSocket], useProgram: Bool = true, quicLB: QUICLBConfiguration? = nil,
        newConnections: Range<Int>? = nil
    ) -> Steering {
        guard sockets.count > 1 else { return .single }
        guard useProgram, let offset = ConnectionIDIssuer.kernelLoopByteOffset(for: quicLB) else { return .forwarding }
        guard attach(program(loops: sockets.count, loopByteOffset: offset, newConnections: newConnections), sockets),
            probesArrive(at: sockets, quicLB: quicLB)
        else { return .forwarding }
        return .kernelProgram
    }

    /// Replaces the group's steering program (attached by `steer`, which probed it) with one sending new
    /// connections to the sockets `newConnections`; established connections keep going by their ID's byte.
    /// The kernel swaps the program atomically for the whole group. False when the kernel refuses it.
    package static func steerNewConnections(
        _ sockets: [UDPSocket], to newConnections: Range<Int>, quicLB: QUICLBConfiguration? = nil
    ) -> Bool {
        guard sockets.count > 1, let offset = ConnectionIDIssuer.kernelLoopByteOffset(for: quicLB) else { return false }
        return attach(program(loops: sockets.count, loopByteOffset: offset, newConnections: newConnections), sockets)
    }

    private static func attach(_ program: [ptt_bpf_insn], _ sockets: [UDPSocket]) -> Bool {
        program.withUnsafeBufferPointer { instructions in
            ptt_attach_reuseport_cbpf(sockets[0].fd, instructions.baseAddress, UInt16(instructions.count))
        } == 0
    }

    /// The steering program over a UDP payload (the kernel runs it with the payload at offset 0). It returns the
    /// socket index `byte % loops` for the destination-connection-ID byte at `loopByteOffset` (0 without QUIC-LB)
    /// of a short-header packet (the ID starts at byte 1) or of a long-header Handshake or Retry packet (byte 6,
    /// after the length at byte 5); for Initial and 0-RTT packets (client-chosen IDs), a version whose packet types
    /// it does not know, or an ID too short it returns an index out of range, which makes the kernel fall back to
    /// its hash. A load past the end of the payload ends the program with 0 (the first loop).
    ///
    /// The long header's type bits mean what its version says (`LongPacketType`): QUIC v2 renumbers them (RFC 9369
    /// §3.2), so its 0-RTT packets (0b10, v1's Handshake) must follow the hash like v1's. The program adds 0b11 to
    /// v2's type bits (modulo 4), which maps v2's numbering onto v1's, then tests v1's Handshake and Retry.
    ///
    /// With `newConnections`, what would follow the hash goes to `newConnections.lowerBound + DCID[offset] % count`
    /// instead (a byte of the client-chosen ID, the same in every Initial and 0-RTT packet of the connection until
    /// the server's ID replaces it; an ID too short: the range's first socket). A server ID names its socket
    /// modulo the group's size by the same byte, which the range's size divides, so the client's packets carrying
    /// it in an Initial reach the same socket.
    static func program(loops: Int, loopByteOffset: Int = 0, newConnections: Range<Int>? = nil) -> [ptt_bpf_insn] {
        let loadByte: UInt16 = 0x30  // BPF_LD | BPF_B | BPF_ABS
        let loadWord: UInt16 = 0x20  // BPF_LD | BPF_W | BPF_ABS (network byte order)
        let loadXImmediate: UInt16 = 0x01  // BPF_LDX | BPF_W | BPF_IMM
        let jumpSet: UInt16 = 0x45  // BPF_JMP | BPF_JSET | BPF_K
        let jumpAlways: UInt16 = 0x05  // BPF_JMP | BPF_JA
        let jumpEqual: UInt16 = 0x15  // BPF_JMP | BPF_JEQ | BPF_K
        let jumpGreater: UInt16 = 0x25  // BPF_JMP | BPF_JGT | BPF_K
        let addX: UInt16 = 0x0c  // BPF_ALU | BPF_ADD | BPF_X
        let and: UInt16 = 0x54  // BPF_ALU | BPF_AND | BPF_K
        let addK: UInt16 = 0x04  // BPF_ALU | BPF_ADD | BPF_K
        let modulo: UInt16 = 0x94  // BPF_ALU | BPF_MOD | BPF_K
        let returnA: UInt16 = 0x16  // BPF_RET | BPF_A
        let returnK: UInt16 = 0x06  // BPF_RET | BPF_K
        func op(_ code: UInt16, _ k: UInt32 = 0, _ jt: UInt8 = 0, _ jf: UInt8 = 0) -> ptt_bpf_insn {
            ptt_bpf_insn(code: code, jt: jt, jf: jf, k: k)
        }
        let offset = UInt32(loopByteOffset)
        // What the kernel's hash would choose, or a socket of `newConnections` by the ID's first byte.
        let unsteered =
            newConnections.flatMap { $0.isEmpty ? nil : $0 }.map { range in
                [
                    op(loadByte, 5),  // 18: A = DCID length
                    op(jumpGreater, offset, 0, 4),  // 19: no byte at the offset → 24
                    op(loadByte, 6 + offset),  // 20: A = DCID[offset]
                    op(modulo, UInt32(range.count)),  // 21: A = A % count
                    op(addK, UInt32(range.lowerBound)),  // 22: A += first
                    op(returnA),  // 23: that socket
                    op(returnK, UInt32(range.lowerBound)),  // 24: the range's first socket
                ]
            } ?? [op(returnK, UInt32.max)]  // 18: hash
        // Jump offsets count the instructions after the jump.
        return [
            op(loadByte, 0),  // 0: A = first byte
            op(jumpSet, 0x80, 2, 0),  // 1: long header → 4
            op(loadByte, 1 + offset),  // 2: short header: A = DCID[offset]
            op(jumpAlways, 12),  // 3: → 16
            op(loadWord, 1),  // 4: A = the version
            op(loadXImmediate, 0),  // 5: X = 0: v1's numbering
            op(jumpEqual, LongPacketType.versionOne, 2, 0),  // 6: v1 → 9
            op(jumpEqual, LongPacketType.versionTwo, 0, 10),  // 7: neither v1 nor v2 → 18
            op(loadXImmediate, 0x30),  // 8: X = 0b11 in the type bits: v2's numbering onto v1's
            op(loadByte, 0),  // 9: A = first byte
            op(addX),  // 10: A += X
            op(and, 0x30),  // 11: A = the packet type, numbered as in v1
            op(jumpGreater, 0x10, 0, 5),  // 12: Initial or 0-RTT → 18
            op(loadByte, 5),  // 13: A = DCID length
            op(jumpGreater, offset, 0, 3),  // 14: no byte at the offset → 18
            op(loadByte, 6 + offset),  // 15: A = DCID[offset]
            op(modulo, UInt32(loops)),  // 16: A = A % loops
            op(returnA),  // 17: that socket
        ] + unsteered
    }

    /// Sends one short-header probe per loop, whose ID byte names that loop, and checks where each arrives.
    private static func probesArrive(at sockets: [UDPSocket], quicLB: QUICLBConfiguration?) -> Bool {
        let bound = sockets[0].localAddress
        let target: SocketAddress?
        if bound.addressBytes.allSatisfy({ $0 == 0 }) {
            target = SocketAddress(
                parsing: bound.family == AF_INET6 ? "[::1]:\(bound.port)" : "127.0.0.1:\(bound.port)")
        } else {
            target = bound
        }
        guard let target, let sender = try? UDPSocket(connectingTo: target) else { return false }
        defer { sender.close() }
        var buffer = [UInt8](repeating: 0, count: 2048)
        for index in sockets.indices {
            let steering = ConnectionIDSteering(index: index, count: sockets.count)
            var probe =
                quicLB == nil
                ? steering.makeID(length: 20).bytes
                : (try? ConnectionIDIssuer(steering: steering, configuration: quicLB).makeID().bytes) ?? []
            probe.insert(0x40, at: 0)  // a short header; 21 bytes at most, too short to draw a stateless reset
            _ = probe.withUnsafeBytes { sender.send($0, to: nil, from: nil, ecn: 0) }
            guard let arrival = arrival(of: probe, at: sockets, buffer: &buffer), arrival == index else {
                return false
            }
        }
        return true
    }

    /// The index of the socket `probe` arrived at within half a second, or nil.
    private static func arrival(of probe: [UInt8], at sockets: [UDPSocket], buffer: inout [UInt8]) -> Int? {
        var descriptors = sockets.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
        let deadline = MonotonicClock.now() + 500_000_000
        while MonotonicClock.now() < deadline {
            guard poll(&descriptors, nfds_t(descriptors.count), 50) > 0 else { continue }
            for (index, socket) in sockets.enumerated() where descriptors[index].revents != 0 {
                while let received = buffer.withUnsafeMutableBytes({ try? socket.receive(into: $0) }) ?? nil {
                    if received.length == probe.count, buffer.prefix(probe.count).elementsEqual(probe) {
                        return index
                    }
                }
            }
        }
        return nil
    }
}

/// The CPUs this process may run on.
package enum ProcessorAffinity {
    /// The number of CPUs in the process's affinity mask (`sched_getaffinity`), at least 1.
    package static var cpuCount: Int { Int(ptt_available_cpus()) }
}
