#!/usr/bin/env python3
"""Pins a QUIC relay's stream reassembly memory, and measures what it pinned.

Each of --connections aioquic clients completes an ordinary handshake, then sends 1-byte STREAM frames at offsets
1, 1 + 4096, 1 + 8192, ... (two per 8 KiB reassembly chunk) on as many streams as the relay's stream and
connection windows allow, and never the byte at offset 0: the relay can deliver nothing and keeps every frame
out of order. The limits come from the relay's transport parameters, so the same run measures any configuration.

With --relay-pid, reads the relay's VmRSS (/proc/PID/status) before the first connection, once every connection
has sent its frames and they were acknowledged (plus --settle seconds), and --after seconds after the connections
closed. --idle sends no frames: the cost of the connections alone, to compare with.

Prints one JSON line: {"connections", "frames", "frame_bytes", "streams_per_connection", "max_data",
"max_stream_data", "max_streams", "rss_before_kib", "rss_pinned_kib", "rss_after_close_kib"}. Exits 1 with one
line on stderr when it could not connect.
"""
import argparse
import asyncio
import contextlib
import json
import sys

from aioquic.asyncio import QuicConnectionProtocol, connect
from aioquic.quic.packet import QuicPacketType
from aioquic import tls
from quic_peer_support import add_relay_arguments, client_configuration, varint

STREAM_OFF_LEN = 0x0E  # STREAM with the OFF and LEN bits (no FIN)
FRAMES_PER_PACKET = 100



def plan(max_data, max_stream_data, max_streams, spacing):
    """The frames (stream ID, offset) that fill the windows without offset 0; connection credit is the sum of each
    stream's highest offset + 1."""
    frames = []
    credit = max_data
    for index in range(max_streams):
        stream_id = 4 * index  # client-initiated bidirectional
        offset = 1
        while offset < max_stream_data and offset + 1 <= credit:
            frames.append((stream_id, offset))
            offset += spacing
        highest = frames[-1][1] + 1 if frames and frames[-1][0] == stream_id else 0
        credit -= highest
        if credit <= 1:
            break
    return frames


def rss_kib(pid):
    if pid is None:
        return None
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return None


def inject(quic, packets):
    """Makes the connection's next 1-RTT write start with these packets of STREAM frames."""
    original = quic._write_application

    def write_application(builder, network_path, now):
        crypto = quic._cryptos[tls.Epoch.ONE_RTT]
        while packets and crypto.send.is_valid():
            builder.start_packet(QuicPacketType.ONE_RTT, crypto)
            for stream_id, offset in packets.pop(0):
                body = varint(stream_id) + varint(offset) + varint(1) + b"x"
                builder.start_frame(STREAM_OFF_LEN, capacity=len(body) + 1).push_bytes(body)
        original(builder, network_path, now)

    quic._write_application = write_application


def configuration(args):
    return client_configuration(args)


async def pin(client, args, totals):
    quic = client._quic
    limits = (quic._remote_max_data, quic._remote_max_stream_data_bidi_remote, quic._remote_max_streams_bidi)
    max_streams = limits[2] if args.streams is None else min(args.streams, limits[2])
    frames = [] if args.idle else plan(limits[0], limits[1], max_streams, args.spacing)
    packets = [frames[i:i + FRAMES_PER_PACKET] for i in range(0, len(frames), FRAMES_PER_PACKET)]
    while packets:
        inject(quic, packets)
        client.transmit()
        await asyncio.sleep(0.005)
    totals["frames"] += len(frames)
    totals["frame_bytes"] += sum(1 + len(varint(s)) + len(varint(o)) + 1 + 1 for s, o in frames)
    totals["streams"] = max(totals["streams"], len({s for s, _ in frames}))
    totals["limits"] = limits


async def run(args):
    totals = {"frames": 0, "frame_bytes": 0, "streams": 0, "limits": (0, 0, 0)}
    before = rss_kib(args.relay_pid)
    async with contextlib.AsyncExitStack() as stack:
        for _ in range(args.connections):
            client = await stack.enter_async_context(
                connect(args.host, args.port, configuration=configuration(args), create_protocol=QuicConnectionProtocol))
            await pin(client, args, totals)
        await asyncio.sleep(args.settle)
        pinned = rss_kib(args.relay_pid)
    await asyncio.sleep(args.after)
    after = rss_kib(args.relay_pid)
    max_data, max_stream_data, max_streams = totals["limits"]
    print(json.dumps({
        "connections": args.connections, "frames": totals["frames"], "frame_bytes": totals["frame_bytes"],
        "streams_per_connection": totals["streams"], "max_data": max_data, "max_stream_data": max_stream_data,
        "max_streams": max_streams, "rss_before_kib": before, "rss_pinned_kib": pinned,
        "rss_after_close_kib": after,
    }), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_relay_arguments(parser)
    parser.add_argument("--connections", type=int, default=20)
    parser.add_argument("--spacing", type=int, default=4096, help="bytes between two 1-byte frames")
    parser.add_argument("--streams", type=int, help="use at most this many streams (default: all the relay allows)")
    parser.add_argument("--idle", action="store_true", help="handshake only, no frames (the baseline)")
    parser.add_argument("--relay-pid", type=int)
    parser.add_argument("--settle", type=float, default=1.0)
    parser.add_argument("--after", type=float, default=2.0)
    args = parser.parse_args()
    try:
        asyncio.run(run(args))
    except Exception as error:  # one clear line, as every peer in this folder does
        print(f"quic_reassembly_pinner: {type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
