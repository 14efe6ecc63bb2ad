#!/usr/bin/env python3
"""A client on aioquic used by the Swift tests to drive PTTTransport's server.

Sends N varint-length-prefixed control messages on each of S bidirectional streams (then FIN), checks the echo
byte for byte (FIN included), sends D datagrams ~1 ms apart and counts the echoes that come back in a short grace
period. With --session-file it resumes from (and saves) an aioquic session ticket; with --early the stream data is
sent as 0-RTT. Prints one JSON line on stdout; exits non-zero with one line on stderr on any failure.
"""
import argparse
import asyncio
import json
import logging
import pickle
import ssl
import sys
import time

from aioquic.asyncio import QuicConnectionProtocol, connect
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.packet import QuicProtocolVersion
from aioquic.quic.events import (
    ConnectionTerminated,
    DatagramFrameReceived,
    HandshakeCompleted,
    StreamDataReceived,
)
from aioquic.tls import AlertDescription, CipherSuite

DATAGRAM_GRACE_SECONDS = 2.0
TICKET_WAIT_SECONDS = 1.0


class Failure(Exception):
    """A failure reported as one line on stderr."""


def varint(value):
    """A QUIC variable-length integer (RFC 9000 section 16)."""
    if value < 1 << 6:
        return bytes([value])
    if value < 1 << 14:
        return (value | 0x4000).to_bytes(2, "big")
    if value < 1 << 30:
        return (value | 0x80000000).to_bytes(4, "big")
    if value < 1 << 62:
        return (value | 0xC000000000000000).to_bytes(8, "big")
    raise ValueError(f"{value} does not fit in a QUIC varint")


def parse_messages(data):
    """Splits varint-framed messages; a truncated tail is returned as `rest`."""
    messages, offset = [], 0
    while offset < len(data):
        length_bytes = 1 << (data[offset] >> 6)
        if offset + length_bytes > len(data):
            break
        length = int.from_bytes(data[offset : offset + length_bytes], "big") & ((1 << (8 * length_bytes - 2)) - 1)
        if offset + length_bytes + length > len(data):
            break
        offset += length_bytes
        messages.append(bytes(data[offset : offset + length]))
        offset += length
    return messages, bytes(data[offset:])


def describe_close(event, alpn):
    """One readable line for a ConnectionTerminated event."""
    code = event.error_code
    reason = event.reason_phrase or "no reason given"
    if 0x100 <= code <= 0x1FF:  # CRYPTO_ERROR: 0x100 + TLS alert
        try:
            alert = AlertDescription(code - 0x100).name
        except ValueError:
            alert = f"alert {code - 0x100}"
        text = f"TLS alert {alert} (QUIC error 0x{code:x}): {reason}"
        if alert == "no_application_protocol":
            text += f" (ALPN {alpn!r} refused)"
        elif alert in ("bad_certificate", "certificate_expired", "unknown_ca", "certificate_unknown"):
            text = "certificate verification failed: " + text
        return text
    return f"QUIC error 0x{code:x}: {reason}"


class ClientProtocol(QuicConnectionProtocol):
    """Records what arrives; never uses wait_connected() (the handshake may complete before anyone waits)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.received = {}
        self.finished = set()
        self.datagrams = set()
        self.handshake = None
        self.handshake_at = None
        self.terminated = None
        self.tickets = []
        self.changed = asyncio.Event()

    def quic_event_received(self, event):
        if isinstance(event, HandshakeCompleted):
            self.handshake, self.handshake_at = event, time.monotonic()
        elif isinstance(event, StreamDataReceived):
            self.received.setdefault(event.stream_id, bytearray()).extend(event.data)
            if event.end_stream:
                self.finished.add(event.stream_id)
        elif isinstance(event, DatagramFrameReceived):
            self.datagrams.add(bytes(event.data))
        elif isinstance(event, ConnectionTerminated):
            self.terminated = event
        self.changed.set()

    def ticket_received(self, ticket):
        self.tickets.append(ticket)
        self.changed.set()

    async def until(self, condition, what, deadline, alpn, fail_on_timeout=True):
        """Waits for `condition()`; fails at once if the connection closes, or at `deadline`."""
        loop = asyncio.get_running_loop()
        while not condition():
            if self.terminated is not None:
                raise Failure(f"connection closed while waiting for {what}: {describe_close(self.terminated, alpn)}")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if fail_on_timeout:
                    raise Failure(f"timed out waiting for {what}")
                return False
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), remaining)
            except asyncio.TimeoutError:
                pass
        return True


async def run(args):
    configuration = QuicConfiguration(is_client=True, alpn_protocols=[args.alpn], max_datagram_frame_size=65536)
    configuration.load_verify_locations(args.ca)
    configuration.verify_mode = ssl.CERT_REQUIRED
    configuration.server_name = args.server_name
    if args.chacha20:
        configuration.cipher_suites = [CipherSuite.CHACHA20_POLY1305_SHA256]
    # aioquic starts in the first supported version and offers them all in version_information (RFC 9368).
    configuration.supported_versions = {
        "1": [QuicProtocolVersion.VERSION_1],  # v1 only: a relay that prefers v2 must keep it in v1
        "2": [QuicProtocolVersion.VERSION_2],  # v2 from the first packet
        "both": [QuicProtocolVersion.VERSION_1, QuicProtocolVersion.VERSION_2],  # start in v1, offer v2
    }[args.quic_version]
    if args.session_file:
        try:
            with open(args.session_file, "rb") as handle:
                configuration.session_ticket = pickle.load(handle)
        except FileNotFoundError:
            pass
        except Exception as error:
            raise Failure(f"cannot load session ticket from {args.session_file}: {error}")

    # Deterministic payloads: per stream, N framed messages.
    expected = []
    for s in range(args.streams):
        bodies = [f"msg {s}-{i} ".encode().ljust(args.message_size, b".") for i in range(args.messages)]
        expected.append(bodies)

    start = time.monotonic()
    deadline = start + args.timeout
    protocol_holder = []

    def ticket_handler(ticket):
        if protocol_holder:
            protocol_holder[0].ticket_received(ticket)

    async with connect(
        args.host,
        args.port,
        configuration=configuration,
        create_protocol=ClientProtocol,
        session_ticket_handler=ticket_handler,
        wait_connected=False,
    ) as client:
        protocol_holder.append(client)

        def handshake_done():
            return client.handshake is not None

        if not args.early:
            client.transmit()  # connect(wait_connected=False) leaves the first flight to us
            await client.until(handshake_done, "the handshake", deadline, args.alpn)

        stream_ids = []
        for bodies in expected:
            stream_id = client._quic.get_next_available_stream_id()
            stream_ids.append(stream_id)
            client._quic.send_stream_data(stream_id, b"".join(varint(len(b)) + b for b in bodies), end_stream=True)
        client.transmit()  # with --early and a ticket, this leaves as 0-RTT

        await client.until(handshake_done, "the handshake", deadline, args.alpn)
        handshake_ms = (client.handshake_at - start) * 1000

        await client.until(
            lambda: all(sid in client.finished for sid in stream_ids), "the stream echoes (with FIN)", deadline, args.alpn
        )
        echoed = 0
        for sid, bodies in zip(stream_ids, expected):
            messages, rest = parse_messages(client.received.get(sid, b""))
            for index, body in enumerate(bodies):
                if index >= len(messages) or messages[index] != body:
                    raise Failure(f"stream {sid}: echo of message {index} differs from what was sent")
                echoed += 1
            if len(messages) != len(bodies) or rest:
                raise Failure(f"stream {sid}: echo carries more than what was sent")

        sent = []
        for i in range(args.datagrams):
            data = f"dgram {i} ".encode().ljust(args.datagram_size, b"~")
            sent.append(data)
            client._quic.send_datagram_frame(data)
            client.transmit()
            await asyncio.sleep(0.001)
        sent_set = set(sent)
        if sent:
            await client.until(
                lambda: len(client.datagrams & sent_set) == len(sent_set),
                "the datagram echoes",
                time.monotonic() + DATAGRAM_GRACE_SECONDS,
                args.alpn,
                fail_on_timeout=False,
            )
        if args.session_file:  # the ticket follows the handshake; do not fail if the server sends none
            await client.until(
                lambda: client.tickets, "a session ticket", time.monotonic() + TICKET_WAIT_SECONDS, args.alpn,
                fail_on_timeout=False,
            )
        handshake = client.handshake
        quic_version = client._quic._version  # the version the connection spoke (aioquic has no public getter)
        client.close()

    if args.session_file and client.tickets:
        with open(args.session_file, "wb") as handle:
            pickle.dump(client.tickets[-1], handle)
    return {
        "alpn": handshake.alpn_protocol,
        "messages_sent": args.messages * args.streams,
        "messages_echoed": echoed,
        "datagrams_sent": len(sent),
        "datagrams_echoed": len(client.datagrams & sent_set),
        "resumed": bool(handshake.session_resumed),
        "early_data_accepted": bool(handshake.early_data_accepted) if args.early else None,
        "handshake_ms": round(handshake_ms, 3),
        "quic_version": 2 if quic_version == QuicProtocolVersion.VERSION_2 else 1,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("host")
    parser.add_argument("port", type=int)
    parser.add_argument("--ca", required=True, help="PEM file of the CA the server certificate must chain to")
    parser.add_argument("--server-name", default="localhost")
    parser.add_argument("--alpn", default="ptt/1")
    parser.add_argument("--messages", type=int, default=10, help="messages per stream")
    parser.add_argument("--streams", type=int, default=1)
    parser.add_argument("--message-size", type=int, default=32)
    parser.add_argument("--datagrams", type=int, default=0)
    parser.add_argument("--datagram-size", type=int, default=80)
    parser.add_argument("--session-file", help="pickled aioquic SessionTicket: loaded if present, then replaced")
    parser.add_argument("--early", action="store_true", help="send the stream messages as 0-RTT")
    parser.add_argument("--chacha20", action="store_true", help="offer TLS_CHACHA20_POLY1305_SHA256 only")
    parser.add_argument("--timeout", type=float, default=10, help="seconds for the handshake and the stream echoes")
    parser.add_argument(
        "--quic-version", choices=["1", "2", "both"], default="1",
        help="speak only v1 or only v2, or start in v1 and offer v2 (compatible version negotiation)",
    )
    args = parser.parse_args()
    logging.getLogger("quic").setLevel(logging.CRITICAL + 1)  # failures are reported below, on one line

    budget = args.timeout + DATAGRAM_GRACE_SECONDS + TICKET_WAIT_SECONDS + 5
    try:
        result = asyncio.run(asyncio.wait_for(run(args), budget))
    except Failure as error:
        print(f"aioquic_client: {error}", file=sys.stderr)
        sys.exit(1)
    except asyncio.TimeoutError:
        print(f"aioquic_client: timed out after {budget:g} s", file=sys.stderr)
        sys.exit(1)
    except Exception as error:
        print(f"aioquic_client: {type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(1)
    print(json.dumps(result, sort_keys=True), flush=True)


if __name__ == "__main__":
    main()
