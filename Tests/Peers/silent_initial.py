#!/usr/bin/env python3
"""An address-validation probe on aioquic: sends the first datagram(s) of a client's Initial flight from a plain UDP
socket, then goes silent and counts every byte the server sends back (its first flight, then whatever its loss
timers resend), to check the anti-amplification limit of RFC 9000 section 8.1: before the client's address is
validated, a server sends at most three times the bytes it received from that address.

The client never acknowledges, never answers, never completes anything: to the server it is a spoofed source.

Prints one JSON line:
  {"bytes_sent", "datagrams_sent", "bytes_received", "datagrams_received", "ratio", "first_reply_ms",
   "last_reply_ms", "packet_types"}
`ratio` is bytes_received / bytes_sent; `packet_types` counts the long-header types of the first packet in each
received datagram (initial, 0rtt, handshake, retry, short, version_negotiation). Exits 1 with one line on stderr
when nothing could be sent.
"""
import argparse
import json
import socket
import sys
import time

from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection

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


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("host")
    parser.add_argument("port", type=int)
    parser.add_argument("--server-name", default="localhost")
    parser.add_argument("--alpn", default="ptt/1")
    parser.add_argument("--bind", default="", help="local address to send from (default: any)")
    parser.add_argument("--datagrams", type=int, default=1, help="how many datagrams of the first flight to send")
    parser.add_argument("--listen", type=float, default=4.0, help="seconds to count replies after sending")
    args = parser.parse_args()

    configuration = QuicConfiguration(is_client=True, alpn_protocols=[args.alpn], server_name=args.server_name)
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

    received = 0
    replies = 0
    types = {}
    first_ms = None
    last_ms = None
    deadline = start + args.listen
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        sock.settimeout(remaining)
        try:
            data, _ = sock.recvfrom(65536)
        except socket.timeout:
            break
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
        "datagrams_sent": len(flight),
        "bytes_received": received,
        "datagrams_received": replies,
        "ratio": round(received / sent, 3) if sent else None,
        "first_reply_ms": None if first_ms is None else round(first_ms, 1),
        "last_reply_ms": None if last_ms is None else round(last_ms, 1),
        "packet_types": types,
    }))


if __name__ == "__main__":
    main()
