#!/usr/bin/env python3
"""An address-validation probe on aioquic: sends the first datagram(s) of a client's Initial flight from a plain UDP
socket, then goes silent and counts every byte the server sends back (its first flight, then whatever its loss
timers resend), to check the anti-amplification limit of RFC 9000 section 8.1: before the client's address is
validated, a server sends at most three times the bytes it received from that address.

The client never acknowledges, never answers, never completes anything: to the server it is a spoofed source.
With --poke N it then sends N tiny long-header packets (--poke-size bytes, --poke-interval apart) to the same
connection ID: packets the server attributes to the connection but cannot decrypt, e.g. to make a server in its
closing state (after --alpn other/9 made it refuse the handshake) repeat its CONNECTION_CLOSE. They count as sent.

Prints one JSON line:
  {"bytes_sent", "datagrams_sent", "bytes_received", "datagrams_received", "ratio", "first_reply_ms",
   "last_reply_ms", "packet_types"}
`ratio` is bytes_received / bytes_sent; `packet_types` counts the long-header types of the first packet in each
received datagram (initial, 0rtt, handshake, retry, short, version_negotiation). Exits 1 with one line on stderr
when nothing could be sent.
"""
import argparse
import json
import os
import socket
import sys
import time

from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection
from aioquic.quic.packet import QuicProtocolVersion

LONG_TYPES = {0: "initial", 1: "0rtt", 2: "handshake", 3: "retry"}


def packet_type(datagram):
    """The type of the first QUIC packet in a datagram, from its first byte (and version)."""
    if not datagram:
        return "empty"
    if datagram[0] & 0x80 == 0:
        return "short"
    if len(datagram) >= 5 and datagram[1:5] == b"\x00\x00\x00\x00":
        return "version_negotiation"
    return LONG_TYPES[(datagram[0] >> 4) & 0x03]


def poke_packet(dcid, size):
    """A long-header Initial for `dcid` that cannot be decrypted: header, then random bytes up to `size`."""
    header = bytes([0xC0]) + (1).to_bytes(4, "big") + bytes([len(dcid)]) + dcid + bytes([0])
    return header + os.urandom(max(0, size - len(header)))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("host")
    parser.add_argument("port", type=int)
    parser.add_argument("--server-name", default="localhost")
    parser.add_argument("--alpn", default="ptt/1")
    parser.add_argument("--bind", default="", help="local address to send from (default: any)")
    parser.add_argument("--datagrams", type=int, default=1, help="how many datagrams of the first flight to send")
    parser.add_argument("--listen", type=float, default=4.0, help="seconds to count replies after sending")
    parser.add_argument("--poke", type=int, default=0, help="tiny packets to send to the connection afterwards")
    parser.add_argument("--poke-size", type=int, default=24, help="bytes per tiny packet")
    parser.add_argument("--poke-interval", type=float, default=0.02, help="seconds between tiny packets")
    args = parser.parse_args()

    # v1 only: packet_type reads v1's long-header types, and a relay on ngtcp2 1.x moves a client offering v2 there.
    configuration = QuicConfiguration(
        is_client=True, alpn_protocols=[args.alpn], server_name=args.server_name,
        supported_versions=[QuicProtocolVersion.VERSION_1],
    )
    quic = QuicConnection(configuration=configuration)
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    address = (args.host, args.port)
    now = time.time()
    quic.connect(address, now=now)
    flight = [data for data, _ in quic.datagrams_to_send(now=now)][: max(1, args.datagrams)]
    if not flight:
        print("silent_initial: aioquic produced no Initial datagram", file=sys.stderr)
        sys.exit(1)

    sock = socket.socket(family, socket.SOCK_DGRAM)
    sock.bind((args.bind, 0))
    sent = 0
    start = time.monotonic()
    for datagram in flight:
        sent += sock.sendto(datagram, address)

    poke = poke_packet(quic._peer_cid.cid, args.poke_size)
    pokes_left = args.poke
    next_poke = time.monotonic() + args.poke_interval
    received = 0
    replies = 0
    types = {}
    first_ms = None
    last_ms = None
    deadline = start + args.listen
    while True:
        now = time.monotonic()
        if pokes_left and now >= next_poke:
            sent += sock.sendto(poke, address)
            pokes_left -= 1
            next_poke = now + args.poke_interval
        remaining = deadline - now
        if remaining <= 0:
            break
        sock.settimeout(min(remaining, max(0.001, next_poke - now)) if pokes_left else remaining)
        try:
            data, source = sock.recvfrom(65536)
        except socket.timeout:
            continue  # the loop ends at the deadline
        if source[:2] != address:
            continue  # another program's packets to a port it used before (full test runs reuse ports quickly)
        elapsed_ms = (time.monotonic() - start) * 1000
        first_ms = elapsed_ms if first_ms is None else first_ms
        last_ms = elapsed_ms
        received += len(data)
        replies += 1
        kind = packet_type(data)
        types[kind] = types.get(kind, 0) + 1
    sock.close()

    print(json.dumps({
        "bytes_sent": sent,
        "datagrams_sent": len(flight) + args.poke - pokes_left,
        "bytes_received": received,
        "datagrams_received": replies,
        "ratio": round(received / sent, 3) if sent else None,
        "first_reply_ms": None if first_ms is None else round(first_ms, 1),
        "last_reply_ms": None if last_ms is None else round(last_ms, 1),
        "packet_types": types,
    }))


if __name__ == "__main__":
    main()
