#!/usr/bin/env python3
"""A hostile QMux client (draft-ietf-quic-qmux-01 over TLS 1.3) for the relay's TCP port. Standard library only;
the QMux state machine is qmux_peer.py's Session.

Connects to 127.0.0.1:PORT (CA and server name verified, ALPN ptt/1-qx01), runs one attack, then holds the
connection open, silent, for --hold seconds (the relay keeps whatever the attack left it), and prints one JSON
line: {"attack", "streams", "bytes_sent", "wire_bytes", "closed", "error", "elapsed_ms"}. Exit status 0 (1 on a
usage error or when the connection could not be set up).

Attacks
  stop-sending   --streams N: on each of N streams, one message and FIN, then STOP_SENDING; opens the next
                 streams as the relay's MAX_STREAMS allows (the relay echoes, or resets on STOP_SENDING).
  one-byte-frames --bytes B [--streams S]: grants the relay no credit (as zero-credit), then sends on each of
                 S streams B bytes of 64,000-byte messages, one byte per STREAM frame, as the relay's credit allows:
                 once the relay's echoes cannot leave, what it has not read stays buffered.
  zero-credit    --streams S [--messages M]: grants the relay no credit at all (initial_max_data and
                 initial_max_stream_data 0, never raised), then sends M messages of 64,000 bytes on each of S
                 streams: the relay's echoes can only queue.
"""

import argparse
import json
import os
import signal
import socket
import ssl
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qmux_peer as q  # noqa: E402


class Client:
    def __init__(self, args, params):
        context = ssl.create_default_context(cafile=args.ca)
        context.minimum_version = ssl.TLSVersion.TLSv1_3
        context.set_alpn_protocols([q.ALPN])
        raw = socket.create_connection(("127.0.0.1", args.port), timeout=args.timeout)
        self.sock = context.wrap_socket(raw, server_hostname=args.server_name)
        self.session = q.Session("client", params)
        self.wire = 0
        self.closed = False
        self.why = None
        self.timeout = args.timeout
        self.send(self.session.take_output())
        while self.session.peer is None and not self.closed:
            self.pump(args.timeout)

    def send(self, data):
        if data and not self.closed:
            try:
                self.sock.settimeout(self.timeout)
                self.sock.sendall(data)
                self.wire += len(data)
            except (OSError, ssl.SSLError) as error:
                self.closed, self.why = True, "send: %s" % error

    def pump(self, timeout):
        """Reads what arrives within `timeout` s (at least one read), answers QX_PING and credit; returns events."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(262144)
        except socket.timeout:
            return []
        except (OSError, ssl.SSLError) as error:
            self.closed, self.why = True, "receive: %s" % error
            return []
        if not data:
            self.closed, self.why = True, "end of stream"
            return []
        self.session.receive(data)
        events, self.session.events = self.session.events, []
        if self.session.closed:
            self.closed = True
        return events

    def hold(self, seconds):
        deadline = time.monotonic() + seconds
        while not self.closed and time.monotonic() < deadline:
            self.pump(max(0.01, deadline - time.monotonic()))


def message(size):
    return q.varint(size) + bytes(size)


def stop_sending(client, args):
    session, opened, done = client.session, 0, set()
    while len(done) < args.streams and not client.closed:
        batch = bytearray()
        while opened < args.streams:
            sid = session.open_bidi()
            if sid is None:
                break
            opened += 1
            session.write(sid, message(1), fin=True)
            session.control.append(q.frame(q.STOP_SENDING, sid, 7))
        batch += session.take_output()
        client.send(bytes(batch))
        for event in client.pump(args.timeout):
            if event[0] == "reset" or (event[0] == "data" and event[3]):
                done.add(event[1])
                session.streams.pop(event[1], None)  # the attacker keeps nothing either
            elif event[0] == "data":
                session.consume(event[1], len(event[2]))
    return opened, opened  # one message byte per stream


def one_byte_frames(client, args):
    """Messages of 64,000 bytes, one byte per STREAM frame, on each stream, as far as the relay's credit goes."""
    session, sent = client.session, 0
    streams = [sid for sid in (session.open_bidi() for _ in range(args.streams)) if sid is not None]
    payload = message(64000)
    offsets = {sid: 0 for sid in streams}
    deadline = time.monotonic() + args.timeout
    while sent < args.bytes * len(streams) and not client.closed and time.monotonic() < deadline:
        out = bytearray()
        for sid in streams:
            stream = session.streams[sid]
            start = offsets[sid]
            room = min(stream.send_max - start, session.conn_send_max - session.conn_sent, args.bytes - start, 4096)
            if room <= 0:
                continue
            prefix = q.varint(0x0E) + q.varint(sid)
            frames = [prefix + q.varint(offset) + b"\x01" + payload[offset % len(payload):offset % len(payload) + 1]
                      for offset in range(start, start + room)]
            for first in range(0, len(frames), 2000):
                out += q.record(frames[first:first + 2000])
            offsets[sid] = stream.sent = start + room  # keep the Session's credit accounting in step
            session.conn_sent += room
            sent += room
        client.send(bytes(out) + session.take_output())
        client.pump(0.01 if out else 0.2)
    return len(streams), sent


def zero_credit(client, args):
    session, sent = client.session, 0
    streams = [session.open_bidi() for _ in range(args.streams)]
    streams = [sid for sid in streams if sid is not None]
    for sid in streams:
        session.write(sid, message(64000) * args.messages)
        sent += (64000 + 4) * args.messages
    deadline = time.monotonic() + args.timeout
    while not client.closed and time.monotonic() < deadline:
        client.send(session.take_output())
        if all(not session.streams[sid].send_buf for sid in streams):
            break
        client.pump(0.05)
    return len(streams), sent


def main():
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM, signal.SIGINT])
    parser = argparse.ArgumentParser(description="hostile QMux client",
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("port", type=int)
    parser.add_argument("--attack", required=True, choices=["stop-sending", "one-byte-frames", "zero-credit"])
    parser.add_argument("--ca", required=True)
    parser.add_argument("--server-name", default="localhost")
    parser.add_argument("--streams", type=int, default=1)
    parser.add_argument("--bytes", type=int, default=1 << 20)
    parser.add_argument("--messages", type=int, default=20)
    parser.add_argument("--hold", type=float, default=0.0)
    parser.add_argument("--timeout", type=float, default=10.0)
    args = parser.parse_args()

    credit = 16 << 20 if args.attack == "stop-sending" else 0
    params = {q.TP_IDLE: 60000, q.TP_MAX_DATA: credit, q.TP_BIDI_LOCAL: credit, q.TP_BIDI_REMOTE: 0,
              q.TP_UNI: 0, q.TP_STREAMS_BIDI: 0, q.TP_STREAMS_UNI: 0}
    start = time.monotonic()
    result = {"attack": args.attack, "error": None}
    try:
        client = Client(args, params)
    except (OSError, ssl.SSLError) as error:
        print(json.dumps({"attack": args.attack, "error": str(error)}), flush=True)
        sys.exit(1)
    attack = {"stop-sending": stop_sending, "one-byte-frames": one_byte_frames, "zero-credit": zero_credit}
    try:
        streams, sent = attack[args.attack](client, args)
        result.update(streams=streams, bytes_sent=sent)
        client.hold(args.hold)
    except (OSError, ssl.SSLError, q.QMuxProtocolError) as error:
        result["error"] = str(error)
    if client.session.closed:
        result["error"] = q.describe_close(client.session.closed)
    elif client.why and not result["error"]:
        result["error"] = client.why
    result.update(wire_bytes=client.wire, closed=client.closed,
                  elapsed_ms=round((time.monotonic() - start) * 1000, 1))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
