#!/usr/bin/env python3
"""A hostile QUIC client on aioquic: completes an ordinary handshake, then sends frames no well-behaved client
sends, to prove that a PTTTransport relay survives them (and that legitimate clients are not punished).

Attacks (--attack):
  ncid-one-packet   one 1-RTT packet: NEW_CONNECTION_ID(seq=20, retire_prior_to=20), then
                    NEW_CONNECTION_ID(seq=5, retire_prior_to=0) twice (the second retires sequence 5 again)
  ncid-two-packets  NEW_CONNECTION_ID(seq=20, retire_prior_to=20) in one packet, then NEW_CONNECTION_ID(seq=0) in
                    the next (sequence 0, the handshake's connection ID, was retired by the first)
  ncid-0rtt         the one-packet sequence in a 0-RTT packet, before the handshake completes (a first
                    connection fetches the session ticket)
  finished-then-stream  a STREAM frame (forbidden there) right after the CRYPTO frame carrying the client's
                    Finished, in the same Handshake packet: the server's TLS completes, then the packet fails
  empty-datagram    a DATAGRAM frame with no payload (an echo relay would send it back empty)
  rotate            not an attack: a legitimate client that switches to a new connection ID of the server's
                    (RETIRE_CONNECTION_ID for the old one) between echoes, --rotations times

Prints one JSON line: what the server did (`closed_by_peer`, `error_code`, `reason`, `echoes`). Exits 0 whenever
the exchange ran to a verdict; exits 1 with one line on stderr when it could not even connect.
"""
import argparse
import asyncio
import json
import os
import sys
import time

from aioquic.asyncio import QuicConnectionProtocol, connect
from aioquic.quic.events import ConnectionTerminated, HandshakeCompleted, StreamDataReceived
from aioquic.quic.packet import QuicPacketType
from aioquic import tls
from quic_peer_support import add_relay_arguments, client_configuration, varint

NEW_CONNECTION_ID = 0x18
DATAGRAM_WITH_LENGTH = 0x31
STREAM_WITH_LENGTH = 0x0A



def ncid(seq, retire_prior_to):
    """A NEW_CONNECTION_ID frame (type, body): a fresh 8-byte CID and a random reset token."""
    return NEW_CONNECTION_ID, varint(seq) + varint(retire_prior_to) + bytes([8]) + os.urandom(8) + os.urandom(16)


def attack_plan(attack):
    """The hostile frames, as a list of packets, each a list of (frame type, body)."""
    if attack in ("ncid-one-packet", "ncid-0rtt"):
        repeated = ncid(5, 0)  # aioquic itself issues sequence numbers 1 to 7: stay clear of them
        return [[ncid(20, 20), repeated, repeated]]
    if attack == "ncid-two-packets":
        return [[ncid(20, 20)], [ncid(0, 0)]]
    if attack == "empty-datagram":
        return [[(DATAGRAM_WITH_LENGTH, varint(0))]]
    return []


def append_after_finished(quic):
    """Makes the client's Handshake packet carrying its Finished also carry a STREAM frame (forbidden there)."""
    original = quic._write_crypto_frame
    done = []

    def write_crypto_frame(builder, space, stream):
        written = original(builder=builder, space=space, stream=stream)
        if written and not done and space is quic._spaces[tls.Epoch.HANDSHAKE]:
            builder.start_frame(STREAM_WITH_LENGTH, capacity=4).push_bytes(varint(0) + varint(1) + b"x")
            done.append(True)
        return written

    quic._write_crypto_frame = write_crypto_frame


def inject(quic, plan, packet_type):
    """Makes the connection's next write of `packet_type` start with the planned packets."""
    original = quic._write_application

    def write_application(builder, network_path, now):
        if plan:
            if quic._cryptos[tls.Epoch.ONE_RTT].send.is_valid():
                current, crypto = QuicPacketType.ONE_RTT, quic._cryptos[tls.Epoch.ONE_RTT]
            elif quic._cryptos[tls.Epoch.ZERO_RTT].send.is_valid():
                current, crypto = QuicPacketType.ZERO_RTT, quic._cryptos[tls.Epoch.ZERO_RTT]
            else:
                current, crypto = None, None
            if current == packet_type:
                for frames in plan:
                    builder.start_packet(packet_type, crypto)
                    for frame_type, body in frames:
                        builder.start_frame(frame_type, capacity=len(body) + 1).push_bytes(body)
                plan.clear()
        original(builder, network_path, now)

    quic._write_application = write_application


class Protocol(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.handshake_done = False
        self.terminated = None
        self.echoed = bytearray()
        self.changed = asyncio.Event()

    def quic_event_received(self, event):
        if isinstance(event, HandshakeCompleted):
            self.handshake_done = True
        elif isinstance(event, StreamDataReceived):
            self.echoed.extend(event.data)
        elif isinstance(event, ConnectionTerminated):
            self.terminated = event
        self.changed.set()

    async def until(self, condition, deadline):
        while not condition() and self.terminated is None and time.monotonic() < deadline:
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), max(0.0, deadline - time.monotonic()))
            except asyncio.TimeoutError:
                pass
        return condition()


def configuration(args, ticket=None):
    return client_configuration(args, ticket)


async def fetch_ticket(args):
    """One ordinary connection, kept open until the server's session ticket arrives."""
    tickets = []
    async with connect(args.host, args.port, configuration=configuration(args),
                       session_ticket_handler=tickets.append) as client:
        deadline = time.monotonic() + args.timeout
        while not tickets and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
    if not tickets:
        raise RuntimeError("the server sent no session ticket")
    return tickets[0]


async def echo(client, stream_id, text, deadline):
    """Sends one framed message on the stream and waits for its echo; True when it came back."""
    body = text.encode()
    before = len(client.echoed)
    client._quic.send_stream_data(stream_id, varint(len(body)) + body)
    client.transmit()
    return await client.until(lambda: len(client.echoed) >= before + 1 + len(body), deadline)


async def run(args):
    ticket = await fetch_ticket(args) if args.attack == "ncid-0rtt" else None
    plan = attack_plan(args.attack)
    deadline = time.monotonic() + args.timeout
    echoes = 0
    async with connect(args.host, args.port, configuration=configuration(args, ticket),
                       create_protocol=Protocol, wait_connected=False) as client:
        if args.attack == "ncid-0rtt":
            inject(client._quic, plan, QuicPacketType.ZERO_RTT)
            stream_id = client._quic.get_next_available_stream_id()
            client._quic.send_stream_data(stream_id, varint(5) + b"early")  # gives the 0-RTT packet a reason
            client.transmit()
            await client.until(lambda: client.handshake_done, deadline)
        elif args.attack == "finished-then-stream":
            append_after_finished(client._quic)
            client.transmit()
            await client.until(lambda: client.handshake_done, deadline)
            # Then go silent (no retransmission, no ACK, no CONNECTION_CLOSE at exit): a server that kept this
            # connection would hold it in the state between "TLS finished" and "handshake complete".
            client._quic.datagrams_to_send = lambda now: []
        else:
            client.transmit()
            if not await client.until(lambda: client.handshake_done, deadline):
                raise RuntimeError("no handshake")
            stream_id = client._quic.get_next_available_stream_id()
            echoes += await echo(client, stream_id, "before", deadline)
            if plan:
                inject(client._quic, plan, QuicPacketType.ONE_RTT)
                client._quic.send_ping(1)  # something to send, so the injected packets leave now
                client.transmit()
            for index in range(args.rotations):
                client._quic.change_connection_id()
                echoes += await echo(client, stream_id, f"rotation {index}", deadline)
        # After an attack that must close the connection, wait for the server's verdict; otherwise (a legitimate
        # client, or a harmless oddity such as an empty DATAGRAM) check that the call still works.
        if args.attack.startswith("ncid") or args.attack == "finished-then-stream":
            await client.until(lambda: False, time.monotonic() + args.verdict_seconds)
        else:
            echoes += await echo(client, stream_id, "after", deadline)
        terminated = client.terminated
    result = {"attack": args.attack, "handshake": client.handshake_done, "echoes": echoes,
              "closed_by_peer": terminated is not None,
              "error_code": terminated.error_code if terminated else None,
              "reason": terminated.reason_phrase if terminated else None}
    print(json.dumps(result), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_relay_arguments(parser)
    parser.add_argument("--attack", required=True,
                        choices=["ncid-one-packet", "ncid-two-packets", "ncid-0rtt", "finished-then-stream",
                                 "empty-datagram", "rotate"])
    parser.add_argument("--rotations", type=int, default=0)
    parser.add_argument("--verdict-seconds", type=float, default=2.0)
    parser.add_argument("--timeout", type=float, default=10.0)
    args = parser.parse_args()
    try:
        asyncio.run(run(args))
    except Exception as error:  # one clear line, as every peer in this folder does
        print(f"quic_attacker: {type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
