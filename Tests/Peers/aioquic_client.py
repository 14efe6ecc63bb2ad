#!/usr/bin/env python3
"""A client on aioquic used by the Swift tests to drive PTTTransport's server.

Sends N varint-length-prefixed control messages on each of S bidirectional streams (then FIN), checks the echo
byte for byte, sends D datagrams and counts the echoes. With --session-file it resumes from (and saves) an aioquic
session ticket; with --early the stream data is sent as 0-RTT. Prints one JSON line; exits non-zero with one line
on stderr on any failure.
"""
import argparse
import asyncio
import json
import pickle
import ssl
import sys
import time

from aioquic.asyncio import QuicConnectionProtocol, connect
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import DatagramFrameReceived, HandshakeCompleted, StreamDataReceived


def varint(value):
    if value < 1 << 6:
        return bytes([value])
    if value < 1 << 14:
        return (value | 0x4000).to_bytes(2, "big")
    if value < 1 << 30:
        return (value | 0x80000000).to_bytes(4, "big")
    return (value | 0xC000000000000000).to_bytes(8, "big")


class ClientProtocol(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.streams = {}
        self.finished = {}
        self.datagrams = set()
        self.handshake = None
        self.handshake_done = asyncio.Event()

    def quic_event_received(self, event):
        if isinstance(event, HandshakeCompleted):
            self.handshake = event
            self.handshake_done.set()
        elif isinstance(event, StreamDataReceived):
            self.streams.setdefault(event.stream_id, bytearray()).extend(event.data)
            if event.end_stream:
                self.finished.setdefault(event.stream_id, asyncio.get_running_loop().create_future()).set_result(True)
        elif isinstance(event, DatagramFrameReceived):
            self.datagrams.add(bytes(event.data))

    def stream_finished(self, stream_id):
        return self.finished.setdefault(stream_id, asyncio.get_running_loop().create_future())


async def run(args):
    configuration = QuicConfiguration(is_client=True, alpn_protocols=[args.alpn], max_datagram_frame_size=65536)
    configuration.load_verify_locations(args.ca)
    configuration.verify_mode = ssl.CERT_REQUIRED
    configuration.server_name = args.server_name
    if args.session_file:
        try:
            with open(args.session_file, "rb") as handle:
                configuration.session_ticket = pickle.load(handle)
        except FileNotFoundError:
            pass
    saved = []
    start = time.monotonic()
    async with connect(
        args.host,
        args.port,
        configuration=configuration,
        create_protocol=ClientProtocol,
        session_ticket_handler=saved.append,
        wait_connected=not args.early,
    ) as client:
        expected = {}
        for s in range(args.streams):
            stream_id = client._quic.get_next_available_stream_id()
            payload = b""
            for i in range(args.messages):
                body = f"msg {s}-{i} ".encode().ljust(args.message_size, b".")
                payload += varint(len(body)) + body
            expected[stream_id] = payload
            client._quic.send_stream_data(stream_id, payload, end_stream=True)
        client.transmit()
        await asyncio.wait_for(client.handshake_done.wait(), args.timeout)
        handshake_ms = (time.monotonic() - start) * 1000
        for stream_id in expected:
            await asyncio.wait_for(client.stream_finished(stream_id), args.timeout)
        echoed = 0
        for stream_id, payload in expected.items():
            if bytes(client.streams.get(stream_id, b"")) != payload:
                raise RuntimeError(f"stream {stream_id} echo differs from what was sent")
            echoed += args.messages
        sent = []
        for i in range(args.datagrams):
            data = f"dgram {i} ".encode().ljust(args.datagram_size, b"~")
            sent.append(data)
            client._quic.send_datagram_frame(data)
            client.transmit()
            await asyncio.sleep(0.001)
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline and len(client.datagrams & set(sent)) < len(sent):
            await asyncio.sleep(0.01)
        if args.session_file:
            await asyncio.sleep(0.05)  # the ticket follows the handshake
        handshake = client.handshake
        client.close()
    if args.session_file and saved:
        with open(args.session_file, "wb") as handle:
            pickle.dump(saved[-1], handle)
    return {
        "alpn": handshake.alpn_protocol,
        "messages_sent": args.messages * args.streams,
        "messages_echoed": echoed,
        "datagrams_sent": args.datagrams,
        "datagrams_echoed": len(client.datagrams & set(sent)),
        "resumed": bool(handshake.session_resumed),
        "early_data_accepted": bool(handshake.early_data_accepted) if args.early else None,
        "handshake_ms": round(handshake_ms, 3),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("host")
    parser.add_argument("port", type=int)
    parser.add_argument("--ca", required=True)
    parser.add_argument("--server-name", default="localhost")
    parser.add_argument("--alpn", default="ptt/1")
    parser.add_argument("--messages", type=int, default=10)
    parser.add_argument("--streams", type=int, default=1)
    parser.add_argument("--message-size", type=int, default=32)
    parser.add_argument("--datagrams", type=int, default=0)
    parser.add_argument("--datagram-size", type=int, default=80)
    parser.add_argument("--session-file")
    parser.add_argument("--early", action="store_true")
    parser.add_argument("--timeout", type=float, default=10)
    args = parser.parse_args()
    try:
        result = asyncio.run(asyncio.wait_for(run(args), args.timeout + 5))
    except Exception as error:
        print(f"aioquic_client: {type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(1)
    print(json.dumps(result, sort_keys=True), flush=True)


if __name__ == "__main__":
    main()
