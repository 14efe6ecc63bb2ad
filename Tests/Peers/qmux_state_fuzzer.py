#!/usr/bin/env python3
"""A stateful fuzzer inside TLS records, against a relay's QMux-over-TLS (TCP) port in another process.

Each sequence is one TCP connection. Standard library only: Python's ssl runs a real TLS 1.3 handshake through
memory BIOs (ALPN ptt/1-qx01, the relay's certificate verified against --ca), so the fuzzer decides which bytes go
into which TLS record and how the records are cut across TCP writes: the ClientHello re-cut into several handshake
records (down to one byte each), QMux records split across TLS records and across steps, one-byte TLS records, TCP
writes of a few bytes. Then a random sequence of steps, each a flight of QMux records (draft-ietf-quic-qmux-01):
STREAM with chosen ids, offsets and FIN (echo messages, a message as one-byte STREAM frames), RESET_STREAM,
STOP_SENDING, MAX_DATA / MAX_STREAM_DATA / MAX_STREAMS (0, huge), DATA_BLOCKED and the other *_BLOCKED, QX_PING,
DATAGRAM, CONNECTION_CLOSE, QX_TRANSPORT_PARAMETERS, prohibited and unknown types, truncated frames, oversized and
empty records, many frames per record; the reading side withheld for a while (a small receive buffer, then not
reading: the relay faces a zero TCP window); a half-close; an abrupt reset (SO_LINGER 0). Chaos sequences can also
stay before the handshake: a ClientHello announced at 131,000 bytes and streamed in one-byte records, a cut
ClientHello, bytes that are not TLS.

The client side is qmux_peer.py's Session, so a valid sequence keeps to QMux's rules (credit, stream limits, the
in-order rule) and checks the relay's: at the end of a valid sequence it grants credit, finishes its streams and
waits for every byte it sent to come back, FIN included, and for its last QX_PING's response (`echo_failures`);
a relay frame that breaks the draft closes the client's Session (`relay_violations`); an honest handshake the relay
does not complete is a `handshake_failures`.

After every sequence it checks that the relay process (--relay-pid) is alive, and with --max-rss-mb that its
resident memory (VmRSS, read at each sequence's deepest point, before the connection closes, and after each
pre-handshake flood) stays below the bar. Either failure prints the sequence's seed and steps and exits 2.
Sequences are reproducible from --seed: sequence i uses seed S + i, so `--seed N --sequences 1` replays sequence N
(the relay's timing may vary).

    qmux_state_fuzzer.py HOST PORT --ca PEM --relay-pid PID [--sequences N] [--seconds S] [--seed S] [--steps K]
                         [--mode mixed|valid|chaos] [--max-rss-mb MB] [--server-name localhost] [--alpn ptt/1-qx01]

--mode valid sends only what a well-behaved client could send (the relay keeps the connection, so sequences reach
deep flow-control and stream states, and the echoes are checked); chaos sends anything, including what the relay
must refuse; mixed (the default) picks valid for 70 % of the sequences.

Prints one JSON line: sequences (valid/chaos), steps, wire bytes and TLS records sent, the relay's CONNECTION_CLOSE
codes, echo_failures / relay_violations / handshake_failures with the first of each (seed, reason, steps), the
relay's RSS at the start, highest and end (KiB), and `aborted` with the failing sequence when the relay died or
grew past --max-rss-mb. Exit 0: the relay survived; 2: it died or grew past the bar; 1: the fuzzer could not run
(no handshake at all, bad arguments), with one line on stderr.
"""

import argparse
import json
import os
import random
import select
import socket
import ssl
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qmux_peer as q  # noqa: E402
from tls_handshake_attacker import record as tls_record, records as tls_records  # noqa: E402

HANDSHAKE, APPLICATION_DATA = 0x16, 0x17
MAX_MESSAGE_BODY = 64000  # below the relay's default maximum message size (64 KiB)
CLOSED_WAIT = 2.0  # seconds a half-closed connection waits for the relay's close


class Closed(Exception):
    """The connection is over (the relay closed or reset it, or a send stalled)."""


class Link:
    """One TCP connection and its TLS client, driven through memory BIOs."""

    def __init__(self, args, context, rcvbuf=None):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(5)
        self.sock.connect((args.host, args.port))
        self.sock.setblocking(False)
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = context.wrap_bio(self.incoming, self.outgoing, server_hostname=args.server_name)
        self.reading = True
        self.ended = None  # why the connection is over: "eof", "reset", "tls: ...", "stalled"
        self.on_plaintext = None
        self.wire_out = self.wire_in = self.records_out = 0
        self.write_gap = 0.0

    # ---- the socket ----
    def read_socket(self):
        try:
            data = self.sock.recv(262144)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self.ended = self.ended or "reset"
            return
        if not data:
            self.ended = self.ended or "eof"
            return
        self.wire_in += len(data)
        self.incoming.write(data)
        if self.tls is not None and self.on_plaintext is not None:
            self.drain_tls()

    def drain_tls(self):
        while True:
            try:
                chunk = self.tls.read(262144)
            except ssl.SSLWantReadError:
                return
            except ssl.SSLZeroReturnError:
                self.ended = self.ended or "close_notify"
                return
            except ssl.SSLError as error:
                self.ended = self.ended or "tls: %s" % error.reason
                return
            if not chunk:
                return
            self.on_plaintext(chunk)

    def send_raw(self, pieces, stall=5.0):
        """Writes each piece in its own send() calls (TCP_NODELAY: each goes out at once), reading meanwhile if
        reading is on. Raises Closed when the relay ended the connection or a piece made no progress for `stall` s
        (while reading is withheld, 1 s without progress turns reading back on: the relay may wait for us)."""
        for piece in pieces:
            view = memoryview(piece)
            last_progress = time.monotonic()
            while view:
                if self.ended:
                    raise Closed(self.ended)
                waited = time.monotonic() - last_progress
                if not self.reading and waited > 1.0:
                    self.reading = True
                if waited > stall:
                    self.ended = "stalled"
                    raise Closed("stalled")
                readable, writable, _ = select.select([self.sock] if self.reading else [], [self.sock], [], 0.2)
                if readable:
                    self.read_socket()
                if writable:
                    try:
                        count = self.sock.send(view)
                    except (BlockingIOError, InterruptedError):
                        continue
                    except OSError:
                        self.ended = self.ended or "reset"
                        raise Closed(self.ended)
                    self.wire_out += count
                    view = view[count:]
                    last_progress = time.monotonic()
            if self.write_gap and len(pieces) <= 8:  # a pause between a few writes, not between hundreds
                time.sleep(self.write_gap)

    def pump(self, seconds, early=False):
        """Reads for `seconds` (at least one poll), or just waits while reading is withheld; `early`: returns
        after the first read."""
        deadline = time.monotonic() + seconds
        while not self.ended:
            left = max(0.0, deadline - time.monotonic())
            if not self.reading:
                time.sleep(left)
                return
            readable, _, _ = select.select([self.sock], [], [], left)
            if readable:
                self.read_socket()
                if early:
                    return
            if time.monotonic() >= deadline:
                return

    # ---- TLS ----
    def handshake(self, rng, trace, timeout=5.0):
        """A real TLS 1.3 handshake whose ClientHello is re-cut into handshake records and TCP writes as `rng`
        says. True once it completed."""
        try:
            self.tls.do_handshake()
        except ssl.SSLWantReadError:
            pass
        hello = b"".join(body for kind, body in tls_records(self.outgoing.read()) if kind == HANDSHAKE)
        count = rng.choice([1, 1, 1, 2, 4, 16, len(hello)])
        size = -(-len(hello) // count)
        flight = b"".join(tls_record(hello[at:at + size]) for at in range(0, len(hello), size))
        writes = cut(rng, flight, rng.choice(["whole", "whole", "pieces", "bytes"]))
        trace.append("client hello in %d records, %d writes" % (-(-len(hello) // size), len(writes)))
        self.send_raw(writes)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.pump(min(0.05, max(0.0, deadline - time.monotonic())))
            if self.ended:
                return False
            try:
                self.tls.do_handshake()
                done = True
            except ssl.SSLWantReadError:
                done = False
            except ssl.SSLError as error:
                self.ended = "tls: %s" % error.reason
                return False
            pending = self.outgoing.read()
            if pending:
                self.send_raw([pending])
            if done:
                return True
        return False

    def send_plaintext(self, data, rng, records="whole", writes="whole"):
        """`data` through TLS: cut into TLS records as `records` says, the records cut into TCP writes as
        `writes` says."""
        if not data:
            return
        for piece in cut(rng, data, records):
            for at in range(0, len(piece), 16384):
                self.tls.write(piece[at:at + 16384])
                self.records_out += 1
        self.send_raw(cut(rng, self.outgoing.read(), writes))

    def reset(self):
        """An abrupt close: RST (SO_LINGER 0)."""
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        self.sock.close()

    def half_close(self, notify):
        """close_notify (when `notify`) and a TCP FIN, then waits for the relay to close its side. True when it
        did within CLOSED_WAIT s."""
        try:
            if notify:
                try:
                    self.tls.unwrap()
                except (ssl.SSLWantReadError, ssl.SSLError):
                    pass
                self.send_raw([self.outgoing.read()])
            self.sock.shutdown(socket.SHUT_WR)
        except (OSError, Closed):
            return True
        self.reading = True
        deadline = time.monotonic() + CLOSED_WAIT
        while not self.ended and time.monotonic() < deadline:
            self.pump(0.05)
        return self.ended is not None


def cut(rng, data, how):
    """Pieces of `data`: whole; a few random cuts; one byte each (for at most 600 bytes, else random cuts)."""
    if how == "whole" or len(data) <= 1:
        return [data]
    if how == "bytes" and len(data) <= 600:
        return [data[at:at + 1] for at in range(len(data))]
    points = sorted({rng.randrange(1, len(data)) for _ in range(rng.randint(1, 6))})
    return [data[start:end] for start, end in zip([0] + points, points + [len(data)])]


def rng_bytes(rng, count):
    return bytes(rng.getrandbits(8) for _ in range(count))


def message(rng, size):
    """An echo message: a QUIC varint length and `size` bytes (a random pattern, repeated)."""
    pattern = rng_bytes(rng, min(size, 64))
    return q.varint(size) + (pattern * (size // 64 + 1))[:size]


class Sequence:
    """One connection's client state: the QMux Session, what was sent on each stream and what came back."""

    def __init__(self, link, rng, params):
        self.link, self.rng = link, rng
        self.session = q.Session("client", params)
        self.sent, self.echoed, self.fin_echoed = {}, {}, set()
        self.fin_sent, self.abandoned = set(), set()  # abandoned: we sent STOP_SENDING or RESET_STREAM
        self.consume = rng.choice(["always", "always", "late"])
        self.pings = self.pong = None
        self.datagrams = self.datagrams_echoed = 0
        self.carry = b""  # plaintext held back: the rest of a QMux record split across steps
        self.withhold_until = 0.0
        link.on_plaintext = self.receive
        link.drain_tls()  # what arrived with the server's last handshake flight

    def receive(self, plaintext):
        session = self.session
        session.receive(plaintext)
        for event in session.events:
            if event[0] == "data":
                _, sid, payload, fin = event
                self.echoed.setdefault(sid, bytearray()).extend(payload)
                if fin:
                    self.fin_echoed.add(sid)
                if self.consume == "always":
                    session.consume(sid, len(payload))
            elif event[0] == "datagram":
                self.datagrams_echoed += 1
            elif event[0] == "pong":
                self.pong = max(self.pong or 0, event[1])
        session.events = []

    def flush(self, records="whole", writes="whole", hold=0):
        """The Session's output (after anything carried from the previous step) through TLS; `hold` bytes of its
        end wait for the next flush."""
        data = self.carry + self.session.take_output()
        self.session.events = [event for event in self.session.events if event[0] != "sent"]
        hold = min(hold, len(data))
        self.carry = data[len(data) - hold:] if hold else b""
        self.link.send_plaintext(data[:len(data) - hold], self.rng, records, writes)

    def given_up(self, sid):
        """A stream whose echo is not owed: we stopped or reset it, or the relay reset or stopped it."""
        stream = self.session.streams.get(sid)
        return sid in self.abandoned or stream is None or stream.reset_sent or stream.reset_received

    def writable_streams(self):
        return [sid for sid in self.session.streams
                if sid % 4 == 0 and sid not in self.fin_sent and not self.given_up(sid)]

    def write(self, sid, data, fin=False):
        self.session.write(sid, data, fin)
        self.sent.setdefault(sid, bytearray()).extend(data)
        if fin:
            self.fin_sent.add(sid)

    def grant(self, amount):
        """Consumes what was received and raises our receive credit (the connection's and every stream's) to
        `amount` past what arrived."""
        session = self.session
        for sid, stream in session.streams.items():
            if stream.final_size is None:
                stream.recv_window = max(stream.recv_window, amount)
                if stream.recv_offset > stream.consumed:
                    session.consume(sid, stream.recv_offset - stream.consumed)
                stream.recv_max = max(stream.recv_max, stream.recv_offset + amount)
                session.control.append(q.frame(q.MAX_STREAM_DATA, sid, stream.recv_max))
        session.conn_recv_max = max(session.conn_recv_max, session.conn_recv + amount)
        session.control.append(q.frame(q.MAX_DATA, session.conn_recv_max))

    def missing_echoes(self):
        """Streams whose echo is not complete yet: {stream: "echoed/sent bytes[, no FIN]"}."""
        return {sid: "%d/%d bytes%s" % (len(self.echoed.get(sid, b"")), len(sent),
                                        "" if sid in self.fin_echoed else ", no FIN")
                for sid, sent in self.sent.items() if not self.given_up(sid)
                and (bytes(self.echoed.get(sid, b"")) != bytes(sent) or sid not in self.fin_echoed)}


# ---- steps ----

VALID_STEPS = (["message", "burst", "bytes", "fin", "ping", "max", "blocked", "padding", "datagram", "stop",
                "reset", "withhold", "grant", "pause", "streams", "churn"],
               [22, 3, 6, 6, 6, 6, 3, 3, 4, 3, 3, 5, 4, 3, 2, 2])
CHAOS_STEPS = (["stream", "reset-any", "stop-any", "max-odd", "blocked-odd", "prohibited", "close", "parameters",
                "unknown", "truncated", "oversized", "empty", "partial", "datagram-odd", "ping-odd", "not-tls"],
               [10, 4, 4, 6, 3, 4, 2, 2, 4, 3, 2, 2, 3, 2, 2, 2])
HUGE = [0, 1, 1 << 20, 1 << 60, (1 << 60) + 1, q.VARINT_MAX]


def valid_step(seq, kind, rng):
    """Queues one valid step in the Session; returns its description."""
    session = seq.session
    if kind in ("message", "burst", "bytes", "fin", "stop", "reset"):
        streams = seq.writable_streams()
        if kind in ("message", "burst") and (not streams or rng.random() < 0.4):
            sid = session.open_bidi()
            if sid is not None:
                streams.append(sid)
        if not streams:
            kind = "ping"
        else:
            sid = rng.choice(streams)
    if kind == "message":
        size = rng.choice([0, 1, 10, 100, 1000, 4000, 16000, MAX_MESSAGE_BODY])
        seq.write(sid, message(rng, size), fin=rng.random() < 0.2)
        return "message %d bytes on %d%s" % (size, sid, " fin" if sid in seq.fin_sent else "")
    if kind == "burst":
        count = rng.randint(2, 24)
        seq.write(sid, message(rng, MAX_MESSAGE_BODY) * count)
        return "burst %d x %d bytes on %d" % (count, MAX_MESSAGE_BODY, sid)
    if kind == "bytes":
        return one_byte_frames(seq, sid, rng)
    if kind == "fin":
        seq.write(sid, b"", fin=True)
        return "fin on %d" % sid
    if kind == "stop":
        session.control.append(q.frame(q.STOP_SENDING, sid, rng.randint(0, 300)))
        seq.abandoned.add(sid)
        return "STOP_SENDING %d" % sid
    if kind == "reset":
        stream = session.streams[sid]
        stream.reset_sent = True
        stream.send_buf.clear()
        session.control.append(q.frame(q.RESET_STREAM, sid, rng.randint(0, 300), stream.sent))
        seq.abandoned.add(sid)
        return "RESET_STREAM %d at %d" % (sid, stream.sent)
    if kind == "ping":
        seq.pings = 0 if seq.pings is None else seq.pings + 1
        session.control.append(q.frame(q.QX_PING, seq.pings))
        return "QX_PING %d" % seq.pings
    if kind == "max":
        which = rng.choice(["data", "stream", "streams"])
        value = rng.choice([0, 1, 1 << 16, 1 << 30, q.VARINT_MAX if which != "streams" else 1 << 60])
        if which == "data":
            session.control.append(q.frame(q.MAX_DATA, value))
            session.conn_recv_max = max(session.conn_recv_max, value)
            return "MAX_DATA %d" % value
        if which == "streams":
            session.control.append(q.frame(rng.choice([q.MAX_STREAMS_BIDI, q.MAX_STREAMS_UNI]), value))
            return "MAX_STREAMS %d" % value
        opened = [sid for sid in session.streams if sid % 4 == 0]
        if not opened:
            return "MAX_STREAM_DATA (no stream)"
        sid = rng.choice(opened)
        session.control.append(q.frame(q.MAX_STREAM_DATA, sid, value))
        session.streams[sid].recv_max = max(session.streams[sid].recv_max, value)
        return "MAX_STREAM_DATA %d %d" % (sid, value)
    if kind == "blocked":
        frame = rng.choice([q.frame(q.DATA_BLOCKED, session.conn_sent),
                            q.frame(q.STREAMS_BLOCKED_BIDI, session.local_limit_bidi),
                            q.frame(q.STREAMS_BLOCKED_UNI, 0)])
        session.control.append(frame)
        return "BLOCKED %s" % frame.hex()
    if kind == "padding":
        session.control.append(bytes(rng.choice([1, 10, 1000])) + q.frame(q.QX_PING, (seq.pings or 0)))
        seq.pings = seq.pings or 0
        return "PADDING then QX_PING"
    if kind == "datagram":
        data = rng_bytes(rng, rng.choice([1, 50, 1000]))
        if session.send_datagram(data):
            seq.datagrams += 1
            return "DATAGRAM %d bytes" % len(data)
        return "DATAGRAM (not negotiated)"
    if kind == "streams":
        return many_streams(seq, rng)
    if kind == "churn":
        return churn(seq, rng)
    if kind == "grant":
        amount = rng.choice([1, 1000, 1 << 20])
        seq.grant(amount)
        return "grant %d" % amount
    if kind == "withhold":
        seq.link.reading = False
        seq.withhold_until = time.monotonic() + rng.choice([0.2, 0.5, 1.0])
        return "stop reading"
    time.sleep(rng.choice([0.01, 0.05]))
    return "pause"


def many_streams(seq, rng):
    """Opens every stream the relay allows (up to 128) and queues 1-4 largest messages on each."""
    opened = []
    while len(opened) < 128:
        sid = seq.session.open_bidi()
        if sid is None:
            break
        opened.append(sid)
    count = rng.randint(1, 4)
    for sid in opened:
        seq.write(sid, message(rng, MAX_MESSAGE_BODY) * count)
    return "%d new streams, %d x %d bytes on each" % (len(opened), count, MAX_MESSAGE_BODY)


def churn(seq, rng):
    """Streams opened and finished one after another (a short message and FIN each, STOP_SENDING too when `rng`
    says), as fast as the relay's MAX_STREAMS allows, for at most 0.5 s."""
    count, stop = rng.choice([10, 50, 300]), rng.random() < 0.5
    opened, deadline = 0, time.monotonic() + 0.5
    while opened < count and time.monotonic() < deadline and not seq.link.ended and not seq.session.closed:
        sid = seq.session.open_bidi()
        if sid is None:
            seq.flush()
            seq.link.pump(0.05, early=True)
            continue
        seq.write(sid, message(rng, rng.choice([0, 5, 100])), fin=True)
        if stop:
            seq.session.control.append(q.frame(q.STOP_SENDING, sid, 7))
            seq.abandoned.add(sid)
        opened += 1
    return "churn: %d streams%s" % (opened, ", each with STOP_SENDING" if stop else "")


def one_byte_frames(seq, sid, rng):
    """A message as one-byte STREAM frames, many per QMux record, within the relay's credit (the Session's
    queued bytes for the stream must be out first, or the order would break)."""
    session = seq.session
    stream = session.streams[sid]
    if stream.send_buf or stream.fin_queued:
        return "bytes (stream %d busy)" % sid
    room = min(stream.send_max - stream.sent, session.conn_send_max - session.conn_sent, 16000)
    if room < 2:
        return "bytes (no credit on %d)" % sid
    data = message(rng, rng.randint(1, room - 2))[:room]
    frames, records, body = [], [], 0
    for index, byte in enumerate(data):
        frame = q.frame(0x0E, sid, stream.sent + index, 1, data=bytes([byte]))
        if body + len(frame) > 16000:
            records.append(q.record(frames))
            frames, body = [], 0
        frames.append(frame)
        body += len(frame)
    records.append(q.record(frames))
    stream.sent += len(data)
    session.conn_sent += len(data)
    seq.sent.setdefault(sid, bytearray()).extend(data)
    session.out += b"".join(records)  # before anything flush() adds: the stream's bytes stay in order
    return "%d one-byte STREAM frames on %d" % (len(data), sid)


def chaos_step(seq, kind, rng):
    """Raw QMux bytes (or raw TCP bytes) that break a rule; returns (plaintext, description)."""
    session = seq.session
    if kind == "stream":
        sid = rng.choice([0, 4, 8, 1, 2, 3, 5, 4 * rng.randint(0, 200), q.VARINT_MAX - 3])
        stream = session.streams.get(sid)
        offset = rng.choice([stream.sent if stream else 0, 0, 1, rng.randint(0, 1 << 20), q.VARINT_MAX - 10])
        data = rng_bytes(rng, rng.choice([0, 1, 9, 300]))
        frame_type = rng.choice([0x08, 0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x0E, 0x0F])
        fields = [sid] + ([offset] if frame_type & 0x04 else []) + ([len(data)] if frame_type & 0x02 else [])
        return q.record([q.frame(frame_type, *fields, data=data)]), "STREAM type 0x%x id %d offset %d len %d" % (
            frame_type, sid, offset, len(data))
    if kind == "reset-any":
        frame = q.frame(q.RESET_STREAM, rng.choice([0, 1, 2, 3, 4, 400]), rng.choice([0, q.VARINT_MAX]),
                        rng.choice(HUGE))
    elif kind == "stop-any":
        frame = q.frame(q.STOP_SENDING, rng.choice([0, 1, 2, 3, 4, 400, q.VARINT_MAX]), rng.randint(0, 9))
    elif kind == "max-odd":
        frame = rng.choice([q.frame(q.MAX_DATA, rng.choice(HUGE)),
                            q.frame(q.MAX_STREAM_DATA, rng.choice([0, 1, 2, 3, 8, 400]), rng.choice(HUGE)),
                            q.frame(rng.choice([q.MAX_STREAMS_BIDI, q.MAX_STREAMS_UNI]), rng.choice(HUGE))])
    elif kind == "blocked-odd":
        frame = rng.choice([q.frame(q.DATA_BLOCKED, rng.choice(HUGE)),
                            q.frame(q.STREAM_DATA_BLOCKED, rng.choice([0, 1, 2, 3, 400]), rng.choice(HUGE)),
                            q.frame(rng.choice([q.STREAMS_BLOCKED_BIDI, q.STREAMS_BLOCKED_UNI]), rng.choice(HUGE))])
    elif kind == "prohibited":
        frame = rng.choice([b"\x01", b"\x02\x00\x00\x00\x00", b"\x06\x00\x05\x18\x00\x00\x01\x00",
                            b"\x07\x01\x00", b"\x18\x01\x00\x08" + bytes(24), b"\x19\x00", b"\x1a" + bytes(8),
                            b"\x1b" + bytes(8), b"\x1e"])
    elif kind == "close":
        reason = rng_bytes(rng, rng.choice([0, 5, 2000]))
        told = rng.choice([len(reason), len(reason) + 7, q.VARINT_MAX])
        frame = rng.choice([q.frame(q.CLOSE_TRANSPORT, rng.choice([0, 7, 0x10a, q.VARINT_MAX]), rng.randint(0, 64),
                                    told, data=reason),
                            q.frame(q.CLOSE_APPLICATION, rng.choice([0, 1, q.VARINT_MAX]), told, data=reason)])
    elif kind == "parameters":
        payload = rng.choice([q.encode_tp({q.TP_MAX_DATA: 1 << 20}), q.encode_tp({0x00: 5}), rng_bytes(rng, 9),
                              q.encode_tp({q.TP_RECORD: 100})])
        frame = q.frame(q.QX_TRANSPORT_PARAMETERS, rng.choice([len(payload), len(payload) + 40]), data=payload)
    elif kind == "unknown":
        frame = rng.choice([b"\x20\x01\x02", b"\x2f", b"\x40\x08\x00\x00", b"\x40\x01", b"\x80\x00\xff\xff\x00",
                            q.varint(0x3F5153300D0A0D0B) + b"\x00", q.varint(rng.getrandbits(62))])
    elif kind == "truncated":
        whole = rng.choice([q.frame(q.RESET_STREAM, 0, 1, 1000), q.frame(q.MAX_STREAM_DATA, 0, 1 << 40),
                            q.frame(0x0E, 0, 0, 10, data=bytes(10)), q.frame(q.QX_PING, 1 << 40)])
        frame = whole[:rng.randrange(1, len(whole))]
    elif kind == "oversized":
        size = rng.choice([16383, 65536, 1 << 24, q.VARINT_MAX])
        return q.varint(size) + rng_bytes(rng, rng.choice([0, 10, 2000])), "record Size %d" % size
    elif kind == "empty":
        return b"\x00", "record Size 0"
    elif kind == "partial":
        size = rng.choice([100, 16382])
        return q.varint(size) + bytes(rng.randrange(0, 50)), "record Size %d, its bytes not all sent" % size
    elif kind == "datagram-odd":
        frame = rng.choice([b"\x30" + rng_bytes(rng, 40), q.frame(q.DATAGRAM_LEN, 70000, data=bytes(100)),
                            q.frame(q.DATAGRAM_LEN, 0)])
    elif kind == "ping-odd":
        frame = rng.choice([q.frame(q.QX_PONG, q.VARINT_MAX), q.frame(q.QX_PING, q.VARINT_MAX),
                            q.frame(q.QX_PONG, 0)])
    else:  # not-tls: bytes outside TLS, straight onto the socket
        raw = rng.choice([rng_bytes(rng, 30), bytes([APPLICATION_DATA, 3, 3, 0, 40]) + rng_bytes(rng, 40),
                          bytes([APPLICATION_DATA, 3, 3, 0xFF, 0xFF]) + bytes(100), bytes([0x14, 3, 3, 0, 1, 1]),
                          bytes([0x15, 3, 3, 0, 2, 2, 50])])
        return raw, "not TLS: %s" % raw[:24].hex()
    return q.record([frame]), "%s %s" % (kind, frame[:24].hex())


PRE_HANDSHAKE = ["hello-flood", "hello-cut", "garbage", "app-data-first"]


def pre_handshake(link, rng, trace, watch):
    """A chaos sequence that never completes a handshake; returns a description of how the relay ended it."""
    kind = rng.choice(PRE_HANDSHAKE)
    if kind == "hello-flood":  # a ClientHello announced as 131,000 bytes, in one-byte handshake records
        seconds = rng.choice([0.1, 0.3, 0.6])
        header = bytes([1]) + struct.pack("!I", 131000)[1:]
        chunk = b"".join(tls_record(bytes([byte])) for byte in header + bytes(8192))
        trace.append("pre-handshake: 131,000-byte ClientHello in 1-byte records for %.1f s" % seconds)
        deadline = time.monotonic() + seconds
        try:
            link.send_raw([chunk], stall=seconds)
            while time.monotonic() < deadline:
                link.send_raw([tls_record(b"\x00") * 4096], stall=max(0.05, deadline - time.monotonic()))
        except Closed:
            pass
        watch()
    elif kind == "hello-cut":
        try:
            link.tls.do_handshake()
        except ssl.SSLWantReadError:
            pass
        hello = link.outgoing.read()
        at = rng.randrange(1, len(hello))
        trace.append("pre-handshake: ClientHello cut at %d of %d bytes" % (at, len(hello)))
        link.send_raw([hello[:at]])
        link.pump(rng.choice([0.05, 0.3]))
    elif kind == "garbage":
        data = rng_bytes(rng, rng.choice([1, 5, 300, 5000]))
        trace.append("pre-handshake: %d random bytes" % len(data))
        link.send_raw([data])
        link.pump(0.1)
    else:
        trace.append("pre-handshake: application data record first")
        link.send_raw([bytes([APPLICATION_DATA, 3, 3, 0, 30]) + rng_bytes(rng, 30)])
        link.pump(0.1)
    return link.ended or "open"


def client_parameters(rng, valid):
    """Our QX_TRANSPORT_PARAMETERS: credit from none to plenty, odd but legal values, an unknown parameter."""
    params = {q.TP_IDLE: rng.choice([0, 5000, 30000]),
              q.TP_MAX_DATA: rng.choice([0, 1000, 1 << 16, 1 << 20, 1 << 24]),
              q.TP_BIDI_LOCAL: rng.choice([0, 100, 65540, 1 << 20]),
              q.TP_BIDI_REMOTE: rng.choice([0, 1 << 16]), q.TP_UNI: 0,
              q.TP_STREAMS_BIDI: rng.choice([0, 0, 4, 1 << 60]), q.TP_STREAMS_UNI: rng.choice([0, 3]),
              q.TP_DATAGRAM: rng.choice([0, 1200, 65535])}
    if rng.random() < 0.3:
        params[q.TP_RECORD] = rng.choice([16382, 65536, 1 << 20])
    if rng.random() < 0.3:
        params[0x1B + 31 * rng.randint(1, 100)] = rng.randint(0, 1000)  # reserved: ignored by the relay
    if not valid and rng.random() < 0.1:
        params[rng.choice([0x00, 0x02, 0x0E])] = 1  # prohibited in QMux: the relay must refuse
    return params


def run_sequence(args, context, rng, valid, totals, watch, trace):
    """One connection, its steps noted in `trace`. Updates totals (closes, findings) as it goes."""
    policy = {"rcvbuf": rng.choice([None, None, 4096]), "records": rng.choice(["whole", "pieces", "bytes"]),
              "writes": rng.choice(["whole", "whole", "pieces", "bytes"]), "hold": rng.choice([0, 0, 1, 3]),
              "gap": rng.choice([0.0, 0.0, 0.001])}
    trace.append("%s %s" % ("valid" if valid else "chaos", json.dumps(policy, sort_keys=True)))
    link = Link(args, context, policy["rcvbuf"])
    try:
        if not valid and rng.random() < 0.15:
            trace.append("ended: %s" % pre_handshake(link, rng, trace, watch))
            return
        link.write_gap = policy["gap"]
        totals["handshake_attempts"] += 1
        if not link.handshake(rng, trace, args.handshake_seconds) or link.tls.selected_alpn_protocol() != args.alpn:
            if valid:
                note_finding(totals, "handshake_failures", trace, "handshake not completed: %s (ALPN %s)" % (
                    link.ended, link.tls.selected_alpn_protocol()))
            return
        totals["handshakes"] += 1
        params = client_parameters(rng, valid)
        trace.append("parameters %s" % json.dumps({"0x%x" % key: value for key, value in params.items()}))
        seq = Sequence(link, rng, params)
        if not valid and rng.random() < 0.1:
            seq.session.out[:0] = q.record([q.frame(q.QX_PING, 0)])  # a first frame that is not the parameters
            trace.append("first frame QX_PING")
        ending = rng.choice(["check"] * 8 + ["half-close", "rst"]) if valid else \
            rng.choice(["close", "half-close", "rst", "rst"])
        for _ in range(rng.randint(1, args.steps)):
            if link.ended or seq.session.closed:
                break
            if not link.reading and time.monotonic() > seq.withhold_until:
                link.reading = True
            totals["steps"] += 1
            if run_step(seq, rng, valid, policy, trace):
                break
        watch()  # the deepest point: whatever the steps made the relay hold, before the connection ends
        if valid and (link.ended or seq.session.closed):
            why = link.ended or q.describe_close(seq.session.closed)
            note_finding(totals, "relay_violations", trace, "a valid sequence ended early: %s" % why)
        finish(seq, ending, rng, trace, totals, args.check_seconds)
        if seq.session.closed and seq.session.closed[0] == "peer":
            _, kind, code, _, reason = seq.session.closed
            key = ("0x%x" if kind == "transport" else "application 0x%x") % code
            totals["closes"][key] = totals["closes"].get(key, 0) + 1
            totals["close_reasons"].setdefault(key, reason)
    except Closed:
        pass
    finally:
        totals["wire_bytes_sent"] += link.wire_out
        totals["wire_bytes_received"] += link.wire_in
        totals["tls_records_sent"] += link.records_out
        if link.sock.fileno() != -1:
            if rng.random() < 0.5:
                link.reset()
            else:
                link.sock.close()


def run_step(seq, rng, valid, policy, trace):
    """One step and its delivery; True when the connection is over."""
    link = seq.link
    if valid or rng.random() < 0.4:
        kind, raw = rng.choices(*VALID_STEPS)[0], None
        trace.append(valid_step(seq, kind, rng))
    else:
        kind = rng.choices(*CHAOS_STEPS)[0]
        raw, description = chaos_step(seq, kind, rng)
        trace.append(description)
    records = policy["records"] if rng.random() < 0.7 else rng.choice(["whole", "pieces", "bytes"])
    try:
        if kind == "not-tls":
            seq.flush(records, policy["writes"])
            link.send_raw([raw])
        elif raw is not None:
            seq.carry += seq.session.take_output() + raw
            seq.flush(records, policy["writes"])
        else:
            seq.flush(records, policy["writes"], hold=policy["hold"] if rng.random() < 0.3 else 0)
        link.pump(rng.choice([0.0, 0.002, 0.01]))
        if not seq.carry:  # the Session's answers (QX_PONG, credit); a held-back record end waits for the next step
            seq.flush()
    except Closed:
        return True
    return False


def finish(seq, ending, rng, trace, totals, check_seconds):
    """Ends the sequence: a valid one checks its echoes (then closes with CONNECTION_CLOSE); otherwise a
    CONNECTION_CLOSE, a half-close or a reset."""
    link, session = seq.link, seq.session
    trace.append("end: " + ending)
    try:
        if ending == "check" and not link.ended and not session.closed:
            check_echoes(seq, rng, trace, totals, check_seconds)
        if link.ended or session.closed and session.closed[0] == "peer":
            return
        if ending in ("check", "close"):
            session.close(0, "done")
            seq.flush()
            link.pump(0.01)
        elif ending == "half-close":
            seq.flush()
            totals["half_closes"] += 1
            totals["half_closes_answered"] += 1 if link.half_close(notify=rng.random() < 0.5) else 0
        else:
            link.reset()
    except Closed:
        pass


def check_echoes(seq, rng, trace, totals, check_seconds):
    """Every byte sent on a stream not given up comes back, FIN included; a probe message on a new stream (once
    the relay's stream limit allows one); and the last QX_PING is answered. Gives up after `check_seconds`
    without progress."""
    link, session = seq.link, seq.session
    link.reading = True
    seq.consume = "always"
    seq.grant(1 << 30)
    for sid, stream in session.streams.items():  # stopped streams too: their receiving side ends with FIN
        if sid % 4 == 0 and not stream.fin_queued and not stream.reset_sent:
            seq.write(sid, b"", fin=True)
    probe, probe_sid = q.varint(14) + b"probe " + rng_bytes(rng, 8), None
    progress, deadline = -1, 0.0
    while not link.ended and not session.closed:
        if probe_sid is None:
            probe_sid = session.open_bidi()
            if probe_sid is not None:
                seq.write(probe_sid, probe, fin=True)
                seq.grant(1 << 30)  # its window may be our initial_max_stream_data_bidi_local, 0
        seq.flush()
        link.pump(0.05, early=True)
        missing = seq.missing_echoes()
        if not missing and probe_sid is not None and (seq.pings is None or seq.pong == seq.pings):
            totals["echoes_checked"] += 1
            return
        echoed = sum(len(data) for data in seq.echoed.values()) + len(seq.fin_echoed)
        if echoed != progress:
            progress, deadline = echoed, time.monotonic() + check_seconds
        elif time.monotonic() > deadline:
            break
    if session.closed and session.closed[0] == "local":
        return  # the relay broke a rule: a relay_violation, reported by the caller
    reason = "echo incomplete, %.0f s without progress: %s" % (check_seconds, seq.missing_echoes() or "")
    if probe_sid is None:
        reason += ", no stream for the probe"
    if seq.pings is not None and seq.pong != seq.pings:
        reason += ", QX_PING %d unanswered (last response %s)" % (seq.pings, seq.pong)
    if link.ended or session.closed:
        reason += " (%s)" % (link.ended or q.describe_close(session.closed))
    note_finding(totals, "echo_failures", trace, reason)


def note_finding(totals, key, trace, reason):
    """Counts a finding; the first of each kind keeps its seed, reason and steps."""
    totals[key] += 1
    if totals.get(key[:-1]) is None:
        totals[key[:-1]] = {"seed": totals["current_seed"], "reason": reason, "steps": list(trace)}


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as stat:
            return stat.read().split(") ")[-1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def rss_kib(pid):
    try:
        with open("/proc/%d/status" % pid) as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("host")
    parser.add_argument("port", type=int)
    parser.add_argument("--ca", required=True)
    parser.add_argument("--server-name", default="localhost")
    parser.add_argument("--alpn", default=q.ALPN)
    parser.add_argument("--relay-pid", type=int, required=True)
    parser.add_argument("--sequences", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=0.0, help="stop after this long (0: no limit)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--steps", type=int, default=16, help="at most this many steps per sequence")
    parser.add_argument("--mode", choices=["mixed", "valid", "chaos"], default="mixed",
                        help="valid: only what a well-behaved client sends; chaos: anything; mixed: 70/30")
    parser.add_argument("--max-rss-mb", type=float, default=0.0,
                        help="fail (exit 2) once the relay's VmRSS exceeds this many MB (0: no bar)")
    parser.add_argument("--handshake-seconds", type=float, default=5.0,
                        help="how long a handshake may take before it counts as not completed")
    parser.add_argument("--check-seconds", type=float, default=5.0,
                        help="how long a valid sequence waits for its echoes to progress")
    args = parser.parse_args()
    args.host = socket.gethostbyname(args.host)

    context = ssl.create_default_context(cafile=args.ca)
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    context.set_alpn_protocols([args.alpn])
    started = time.monotonic()
    totals = {"sequences": 0, "valid_sequences": 0, "chaos_sequences": 0, "handshakes": 0, "steps": 0,
              "wire_bytes_sent": 0, "wire_bytes_received": 0, "tls_records_sent": 0, "handshake_attempts": 0,
              "closes": {}, "close_reasons": {}, "half_closes": 0, "half_closes_answered": 0, "echoes_checked": 0,
              "echo_failures": 0, "relay_violations": 0, "handshake_failures": 0, "rss_start_kib": None,
              "rss_max_kib": None, "rss_end_kib": None, "rss_growth_max_kib": 0, "rss_growth_max_seed": None,
              "aborted": None}
    totals["rss_start_kib"] = totals["rss_max_kib"] = rss_kib(args.relay_pid)
    if totals["rss_start_kib"] is None:
        raise RuntimeError("no relay process %d" % args.relay_pid)
    trace = []

    peak = {}

    def watch():
        """Reads the relay's RSS; raises Overgrown past --max-rss-mb."""
        rss = rss_kib(args.relay_pid)
        if rss is not None:
            totals["rss_max_kib"] = max(totals["rss_max_kib"] or 0, rss)
            peak["kib"] = max(peak.get("kib", 0), rss)
            if args.max_rss_mb and rss > args.max_rss_mb * 1024:
                raise Overgrown("the relay's RSS reached %.1f MB, above --max-rss-mb %g" % (
                    rss / 1024, args.max_rss_mb))

    for index in range(args.sequences):
        if args.seconds and time.monotonic() - started > args.seconds:
            break
        seed = args.seed + index
        totals["current_seed"] = seed
        rng = random.Random(seed)
        valid = args.mode == "valid" or (args.mode == "mixed" and rng.random() < 0.7)
        trace = []
        before = peak["kib"] = rss_kib(args.relay_pid) or 0
        try:
            run_sequence(args, context, rng, valid, totals, watch, trace)
            watch()
        except Overgrown as error:
            totals["aborted"] = {"reason": str(error), "seed": seed, "steps": trace}
        except OSError as error:  # the connection itself failed: the relay is gone or refuses
            trace.append("connect: %s" % error)
        totals["sequences"] += 1
        totals["valid_sequences" if valid else "chaos_sequences"] += 1
        if peak["kib"] - before > totals["rss_growth_max_kib"]:  # the most one connection added, and which
            totals["rss_growth_max_kib"], totals["rss_growth_max_seed"] = peak["kib"] - before, seed
        if totals["aborted"] is None and not alive(args.relay_pid):
            totals["aborted"] = {"reason": "the relay process died", "seed": seed, "steps": trace}
        if totals["aborted"] is not None:
            break
    totals.pop("current_seed", None)
    totals["rss_end_kib"] = rss_kib(args.relay_pid)
    totals["seconds"] = round(time.monotonic() - started, 1)
    print(json.dumps(totals), flush=True)
    if totals["aborted"] is not None:
        sys.exit(2)
    if totals["handshake_attempts"] and not totals["handshakes"]:
        print("qmux_state_fuzzer: no handshake completed with the relay", file=sys.stderr)
        sys.exit(1)


class Overgrown(Exception):
    """The relay's resident memory passed --max-rss-mb."""


if __name__ == "__main__":
    try:
        main()
    except (RuntimeError, ValueError, OSError, ssl.SSLError) as error:
        print("qmux_state_fuzzer: %s" % error, file=sys.stderr)
        sys.exit(1)
