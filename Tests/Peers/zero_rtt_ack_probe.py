#!/usr/bin/env python3
"""A steering probe on aioquic (issue 31, item 9): do a relay's loops receive every 0-RTT packet that travels in a
datagram of its own? A multi-loop relay hashes a client's Initial (whose destination connection ID the client chose)
to one loop; its 0-RTT packets carry the same client-chosen ID and must reach the same loop. A 0-RTT packet that
leads a datagram is steered by its own header, so a steering rule that reads the long-header type with the wrong
version's numbers (QUIC v2 renumbers them, RFC 9369 section 3.2: its 0-RTT is v1's Handshake) sends it to a loop
that has no such connection, which drops it: it is never acknowledged.

One full handshake takes a ticket; then each of --wakes connections, from a fresh UDP port (so the kernel's hash
spreads them over the loops), resumes with the newest ticket: it sends its Initial alone, then one 0-RTT packet in a
datagram of its own (a framed message of --early-bytes on a new stream), and waits for the handshake, the relay's
acknowledgement or loss of that packet, and the next ticket. Prints one JSON line:
  {"quic_version", "wakes", "zero_rtt_packets", "zero_rtt_leading_datagrams", "zero_rtt_acknowledged",
   "zero_rtt_lost", "zero_rtt_unresolved", "early_data_accepted", "resumed", "failures"}
`zero_rtt_leading_datagrams` counts the datagrams that began with a 0-RTT header of the chosen version (read with
that version's type numbers). Exits 1 with one line on stderr when the first handshake fails.
"""
import argparse
import json
import select
import socket
import sys
import time

from aioquic import tls
from aioquic.quic.connection import QuicConnection
from aioquic.quic.events import ConnectionTerminated, HandshakeCompleted
from aioquic.quic.packet import QuicPacketType, QuicProtocolVersion
from aioquic.quic.packet_builder import QuicDeliveryState
from quic_peer_support import add_relay_arguments, client_configuration, varint

VERSIONS = {"1": QuicProtocolVersion.VERSION_1, "2": QuicProtocolVersion.VERSION_2}
# The 0-RTT type bits of each version's long header: v1 0b01 (RFC 9000 section 17.2), v2 0b10 (RFC 9369 section 3.2).
ZERO_RTT_BITS = {QuicProtocolVersion.VERSION_1: 1, QuicProtocolVersion.VERSION_2: 2}


def leads_with_zero_rtt(datagram, version):
    """Whether the datagram's first packet is a long-header 0-RTT packet of `version`."""
    if len(datagram) < 5 or datagram[0] & 0x80 == 0 or int.from_bytes(datagram[1:5], "big") != version:
        return False
    return (datagram[0] >> 4) & 3 == ZERO_RTT_BITS[version]


class Wake:
    """One connection: the Initial alone, then (with a ticket) one 0-RTT datagram; tracks what became of it."""

    def __init__(self, args, version, ticket):
        self.tickets = []
        configuration = client_configuration(args, ticket=ticket, supported_versions=[version])
        self.quic = QuicConnection(configuration=configuration, session_ticket_handler=self.tickets.append)
        self.version = version
        self.address = (args.host, args.port)
        family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_DGRAM)
        self.sock.bind(("", 0))
        self.sock.setblocking(False)
        self.states = {}  # 0-RTT packet number -> "acked" / "lost" / None (not yet known)
        self.leading = 0
        self.handshake = None
        self.terminated = None

    def delivered(self, state, packet_number):
        self.states[packet_number] = "acked" if state == QuicDeliveryState.ACKED else "lost"

    def transmit(self, now, track_zero_rtt=False):
        datagrams = self.quic.datagrams_to_send(now=now)
        if track_zero_rtt:
            self.leading += sum(1 for data, _ in datagrams if leads_with_zero_rtt(data, self.version))
            space = self.quic._spaces[tls.Epoch.ONE_RTT]  # 0-RTT and 1-RTT share the application space
            for number, packet in space.sent_packets.items():
                if packet.packet_type == QuicPacketType.ZERO_RTT and number not in self.states:
                    self.states[number] = None
                    packet.delivery_handlers.append((self.delivered, (number,)))
        for data, address in datagrams:
            self.sock.sendto(data, address)

    def run(self, early_bytes, deadline):
        now = time.time()
        self.quic.connect(self.address, now=now)
        self.transmit(now)  # the Initial alone: no stream data yet
        if self.quic.configuration.session_ticket is not None:
            stream_id = self.quic.get_next_available_stream_id()
            body = b"w" * early_bytes
            self.quic.send_stream_data(stream_id, varint(len(body)) + body, end_stream=True)
            self.transmit(now, track_zero_rtt=True)  # 0-RTT keys exist: one datagram led by a 0-RTT packet
        while time.monotonic() < deadline:
            if self.finished():
                break
            timer = self.quic.get_timer()
            wait = 0.05 if timer is None else min(0.05, max(0.0, timer - time.time()))
            readable, _, _ = select.select([self.sock], [], [], wait)
            now = time.time()
            if readable:
                try:
                    while True:
                        data, _ = self.sock.recvfrom(65536)
                        self.quic.receive_datagram(data, self.address, now=now)
                except BlockingIOError:
                    pass
            timer = self.quic.get_timer()
            if timer is not None and timer <= now:
                self.quic.handle_timer(now=now)
            while (event := self.quic.next_event()) is not None:
                if isinstance(event, HandshakeCompleted):
                    self.handshake = event
                elif isinstance(event, ConnectionTerminated):
                    self.terminated = event
            if self.terminated is not None:
                break
            self.transmit(now)
        self.quic.close()
        self.transmit(time.time())
        self.sock.close()

    def finished(self):
        resolved = all(state is not None for state in self.states.values())
        return self.handshake is not None and resolved and bool(self.tickets)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_relay_arguments(parser)
    parser.add_argument("--quic-version", choices=sorted(VERSIONS), default="2")
    parser.add_argument("--wakes", type=int, default=100)
    parser.add_argument("--early-bytes", type=int, default=200, help="the 0-RTT message's size (one packet)")
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds each connection may take")
    args = parser.parse_args()
    version = VERSIONS[args.quic_version]

    first = Wake(args, version, ticket=None)
    first.run(args.early_bytes, time.monotonic() + args.timeout)
    if first.handshake is None or not first.tickets:
        reason = first.terminated.reason_phrase if first.terminated else "no handshake or no ticket in time"
        print(f"zero_rtt_ack_probe: the first connection failed: {reason}", file=sys.stderr)
        sys.exit(1)
    ticket = first.tickets[-1]
    totals = {"packets": 0, "leading": 0, "acked": 0, "lost": 0, "unresolved": 0, "accepted": 0, "resumed": 0}
    failures = []
    for index in range(args.wakes):
        wake = Wake(args, version, ticket=ticket)
        wake.run(args.early_bytes, time.monotonic() + args.timeout)
        states = list(wake.states.values())
        totals["packets"] += len(states)
        totals["leading"] += wake.leading
        totals["acked"] += states.count("acked")
        totals["lost"] += states.count("lost")
        totals["unresolved"] += states.count(None)
        if wake.handshake is not None:
            totals["accepted"] += 1 if wake.handshake.early_data_accepted else 0
            totals["resumed"] += 1 if wake.handshake.session_resumed else 0
        if wake.tickets:
            ticket = wake.tickets[-1]
        if wake.handshake is None or not wake.tickets:
            failures.append(index)
    print(
        json.dumps(
            {
                "quic_version": int(args.quic_version),
                "wakes": args.wakes,
                "zero_rtt_packets": totals["packets"],
                "zero_rtt_leading_datagrams": totals["leading"],
                "zero_rtt_acknowledged": totals["acked"],
                "zero_rtt_lost": totals["lost"],
                "zero_rtt_unresolved": totals["unresolved"],
                "early_data_accepted": totals["accepted"],
                "resumed": totals["resumed"],
                "failures": failures[:10],
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
