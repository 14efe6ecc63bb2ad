#!/usr/bin/env python3
"""An echo server on aioquic, an independent QUIC implementation, used as an interop peer by the Swift tests.

Every byte on a client-opened bidirectional stream is written back on that stream (FIN too); every DATAGRAM is
sent back. Session tickets are kept in memory (single use, as aioquic does) so clients can resume with 0-RTT.
Prints `listening on HOST:PORT` once ready; exits 0 on SIGINT/SIGTERM. With `--count-datagrams` (the benchmark's
capacity-datagrams) DATAGRAMs are counted instead of echoed, and `datagrams_received N` is printed on exit. With
`--count-handshakes`, `handshakes N` (completed handshakes) is printed on exit: a migrating client must not make
a second one.
"""
import argparse
import asyncio
import signal
import sys

from aioquic.asyncio import QuicConnectionProtocol, serve
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import DatagramFrameReceived, HandshakeCompleted, StreamDataReceived
from aioquic.quic.packet import QuicProtocolVersion


class EchoProtocol(QuicConnectionProtocol):
    count_datagrams = False
    datagrams_received = 0
    handshakes = 0

    def quic_event_received(self, event):
        if isinstance(event, HandshakeCompleted):
            EchoProtocol.handshakes += 1
        elif isinstance(event, StreamDataReceived):
            if event.stream_id % 4 == 0:  # client-initiated bidirectional; other streams are read and dropped
                self._quic.send_stream_data(event.stream_id, event.data, end_stream=event.end_stream)
                self.transmit()
        elif isinstance(event, DatagramFrameReceived):
            if EchoProtocol.count_datagrams:
                EchoProtocol.datagrams_received += 1
                return
            self._quic.send_datagram_frame(event.data)
            self.transmit()


class TicketStore:
    def __init__(self):
        self.tickets = {}

    def add(self, ticket):
        self.tickets[ticket.ticket] = ticket

    def pop(self, label):
        return self.tickets.pop(label, None)  # None for unknown tickets: a full handshake


async def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--alpn", default="ptt/1")
    parser.add_argument("--retry", action="store_true")
    parser.add_argument("--max-datagram-frame-size", type=int, default=65536)
    parser.add_argument("--count-datagrams", action="store_true")
    parser.add_argument("--count-handshakes", action="store_true")
    parser.add_argument(
        "--v1-only", action="store_true", help="speak QUIC v1 only: answer a v2 Initial with Version Negotiation"
    )
    args = parser.parse_args()
    EchoProtocol.count_datagrams = args.count_datagrams

    configuration = QuicConfiguration(
        is_client=False, alpn_protocols=[args.alpn], max_datagram_frame_size=args.max_datagram_frame_size
    )
    configuration.load_cert_chain(args.cert, args.key)
    if args.v1_only:
        configuration.supported_versions = [QuicProtocolVersion.VERSION_1]
    tickets = TicketStore()
    server = await serve(
        args.host,
        args.port,
        configuration=configuration,
        create_protocol=EchoProtocol,
        session_ticket_fetcher=tickets.pop,
        session_ticket_handler=tickets.add,
        retry=args.retry,
    )
    host, port = server._transport.get_extra_info("sockname")[:2]
    shown = f"[{host}]" if ":" in host else host
    print(f"listening on {shown}:{port}", flush=True)

    stop = asyncio.Event()
    # A parent may spawn us with these signals blocked (threads of a Swift test process do): unblock them.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    loop = asyncio.get_running_loop()
    for number in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(number, stop.set)
    await stop.wait()
    server.close()
    if args.count_datagrams:
        print(f"datagrams_received {EchoProtocol.datagrams_received}", flush=True)
    if args.count_handshakes:
        print(f"handshakes {EchoProtocol.handshakes}", flush=True)


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except Exception as error:  # one clear line, non-zero exit
        print(f"aioquic_echo_server: {error}", file=sys.stderr)
        sys.exit(1)
