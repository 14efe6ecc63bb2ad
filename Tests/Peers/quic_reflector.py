#!/usr/bin/env python3
"""Tries to make a QUIC relay reflect its CONNECTION_CLOSE toward a victim address (issue 21, item 7).

1. An aioquic client completes an ordinary handshake from its own address A.
2. Its next 1-RTT packet (a 1000-byte DATAGRAM, non-probing) leaves from the victim's address V instead: a UDP
   socket bound to --victim-host (127.0.0.2 on loopback is a separate address), so the relay moves the connection
   to V, which never proved anything.
3. A second packet from V carries a TLS KeyUpdate in a CRYPTO frame, which the relay refuses: it closes the
   connection, with a long reason. (A NEW_CONNECTION_ID the relay would refuse no longer serves: while a path change
   settles, the relay drops packets carrying NEW_CONNECTION_ID instead.)
4. --pokes tiny packets (a short header and the connection ID, 19 bytes) from A, each of which a closing
   connection answers with its CONNECTION_CLOSE.

The socket at V counts every byte the relay sends there. Prints one JSON line: {"bytes_from_victim",
"bytes_to_victim", "datagrams_to_victim", "pokes", "poke_bytes"}; a relay that keeps RFC 9000 section 8 keeps
bytes_to_victim <= 3 * bytes_from_victim. Exits 1 with one line on stderr when it could not connect.
"""
import argparse
import asyncio
import json
import socket
import sys

from aioquic.asyncio import QuicConnectionProtocol, connect
from aioquic.quic.packet import QuicPacketType
from aioquic import tls
from quic_peer_support import add_relay_arguments, client_configuration, varint

CRYPTO = 0x06
KEY_UPDATE = bytes([0x18, 0x00, 0x00, 0x01, 0x00])  # TLS KeyUpdate(update_not_requested), forbidden in QUIC



def inject_refused_frames(quic):
    """The next 1-RTT write carries a CRYPTO frame holding a TLS KeyUpdate (the relay refuses it)."""
    original = quic._write_application
    frames = [varint(0) + varint(len(KEY_UPDATE)) + KEY_UPDATE]

    def write_application(builder, network_path, now):
        if frames:
            builder.start_packet(QuicPacketType.ONE_RTT, quic._cryptos[tls.Epoch.ONE_RTT])
            for body in frames:
                builder.start_frame(CRYPTO, capacity=len(body) + 1).push_bytes(body)
            frames.clear()
        original(builder, network_path, now)

    quic._write_application = write_application


def configuration(args):
    return client_configuration(args)


async def run(args):
    loop = asyncio.get_running_loop()
    victim = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    victim.bind((args.victim_host, 0))
    victim.setblocking(False)
    received = {"bytes": 0, "datagrams": 0}

    def on_victim_readable():
        while True:
            try:
                data = victim.recv(65536)
            except BlockingIOError:
                return
            received["bytes"] += len(data)
            received["datagrams"] += 1

    loop.add_reader(victim.fileno(), on_victim_readable)
    sent_from_victim = 0
    pokes = 0
    async with connect(args.host, args.port, configuration=configuration(args),
                       create_protocol=QuicConnectionProtocol) as client:
        await asyncio.sleep(0.3)  # HANDSHAKE_DONE, NEW_CONNECTION_ID and acknowledgements settle
        quic = client._quic

        server = None  # the relay as aioquic's own socket addresses it (an IPv6-mapped address, say)

        def send_from_victim():
            nonlocal sent_from_victim, server
            for data, addr in quic.datagrams_to_send(now=loop.time()):
                server = addr
                victim.sendto(data, (args.host, args.port))
                sent_from_victim += len(data)

        quic.send_datagram_frame(b"m" * 1000)
        send_from_victim()
        await asyncio.sleep(0.05)
        inject_refused_frames(quic)
        quic.send_ping(1)
        send_from_victim()
        # From now on aioquic itself stays silent (its resends from A would move the connection back).
        quic.datagrams_to_send = lambda now: []
        await asyncio.sleep(0.05)
        poke = bytes([0x40]) + quic._peer_cid.cid
        for _ in range(args.pokes):
            client._transport.sendto(poke, server)
            pokes += 1
            await asyncio.sleep(args.poke_interval)
        await asyncio.sleep(args.listen)
    loop.remove_reader(victim.fileno())
    print(json.dumps({
        "bytes_from_victim": sent_from_victim, "bytes_to_victim": received["bytes"],
        "datagrams_to_victim": received["datagrams"], "pokes": pokes, "poke_bytes": pokes * len(poke),
    }), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_relay_arguments(parser)
    parser.add_argument("--victim-host", default="127.0.0.2")
    parser.add_argument("--pokes", type=int, default=300)
    parser.add_argument("--poke-interval", type=float, default=0.002)
    parser.add_argument("--listen", type=float, default=1.0)
    args = parser.parse_args()
    try:
        asyncio.run(run(args))
    except Exception as error:  # one clear line, as every peer in this folder does
        print(f"quic_reflector: {type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
