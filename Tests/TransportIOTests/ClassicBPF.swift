internal import CTransportShims

/// A classic-BPF interpreter for the instructions the steering program uses (loads of a byte or a big-endian word
/// at a fixed offset, an immediate into X, add X, add an immediate, and, mod, the jumps and the returns), as the kernel runs them on a
/// UDP payload: a load past the end returns 0.
enum ClassicBPF {
    struct Unsupported: Error { let code: UInt16 }

    static func run(_ program: [ptt_bpf_insn], on packet: [UInt8]) throws -> UInt32 {
        var a: UInt32 = 0
        var x: UInt32 = 0
        var pc = 0
        while pc < program.count {
            let instruction = program[pc]
            let k = instruction.k
            pc += 1
            switch instruction.code {
            case 0x30:  // ld b[k]
                guard Int(k) < packet.count else { return 0 }
                a = UInt32(packet[Int(k)])
            case 0x20:  // ld w[k]
                guard Int(k) + 4 <= packet.count else { return 0 }
                a = (0..<4).reduce(UInt32(0)) { $0 << 8 | UInt32(packet[Int(k) + $1]) }
            case 0x01: x = k  // ldx #k
            case 0x0c: a = a &+ x  // add x
            case 0x04: a = a &+ k  // add #k
            case 0x54: a &= k  // and #k
            case 0x94: a = k == 0 ? 0 : a % k  // mod #k
            case 0x05: pc += Int(k)  // ja
            case 0x15: pc += Int(a == k ? instruction.jt : instruction.jf)  // jeq #k
            case 0x25: pc += Int(a > k ? instruction.jt : instruction.jf)  // jgt #k
            case 0x45: pc += Int(a & k != 0 ? instruction.jt : instruction.jf)  // jset #k
            case 0x16: return a  // ret a
            case 0x06: return k  // ret #k
            default: throw Unsupported(code: instruction.code)
            }
        }
        return 0
    }
}
