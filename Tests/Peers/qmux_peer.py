#!/usr/bin/env python3
"""An independent QMux peer (draft-ietf-quic-qmux-01) for interoperability tests. Standard library only.

QMux carries QUIC version 1 frames in records (Size (i) + frames) over TLS 1.3 on TCP. This peer implements,
from the draft: records and max_record_size (sec. 3.2, 5.2), QX_TRANSPORT_PARAMETERS as the first frame both
ways (sec. 4.2), QX_PING request/response (sec. 4.3), permitted/prohibited frames (sec. 4), in-order STREAM
data (sec. 4.1), permitted/prohibited transport parameters (sec. 5.1), DATAGRAM when negotiated (sec. 9.1),
QUIC flow control and CONNECTION_CLOSE without draining (sec. 7).

Modes
  server  TLS 1.3 server (ALPN ptt/1-qx01). Echoes every bidirectional stream's bytes and FIN on the same
          stream, and every DATAGRAM. Prints "listening on HOST:PORT" once listening. Prints one line per
          connection that ends with an error or a CONNECTION_CLOSE from the client ("closed: ...").
          --bad MODE misbehaves on purpose:
            wrong-first-frame  a QX_PING request before QX_TRANSPORT_PARAMETERS
                               (expected peer reaction: TRANSPORT_PARAMETER_ERROR 0x08)
            prohibited-frame   an ACK frame right after QX_TRANSPORT_PARAMETERS (FRAME_ENCODING_ERROR 0x07)
            truncated-record   a record whose last frame is cut short (FRAME_ENCODING_ERROR 0x07)
            garbage            bytes that are not QMux: an oversized Size field (FRAME_ENCODING_ERROR 0x07)
  pipe-server  The same server session (echo, --bad) on stdin/stdout without TLS: raw QMux plaintext, for
          tests that drive a sans-IO QMux implementation through pipes. Log lines go to stderr.
  client  Connects (CA and server name verified, ALPN ptt/1-qx01), opens --streams bidirectional streams, sends
          --messages varint-length-prefixed messages on each then FIN, sends --datagrams DATAGRAM frames, checks
          the echo, closes with application code 0 and prints one JSON line. On failure: exit status 1 and one
          line on stderr.

Examples
  qmux_peer.py server --cert certs/server.pem --key certs/server.key --port 0
  qmux_peer.py client --ca certs/ca.pem --server-name localhost --port 4433 --streams 4 --messages 10 --datagrams 5
"""

import argparse
import asyncio
import json
import os
import signal
import ssl
import sys
import time

ALPN = "ptt/1-qx01"

# Frame types (RFC 9000 sec. 19, RFC 9221, draft sec. 4.2 and 4.3).
PADDING, RESET_STREAM, STOP_SENDING = 0x00, 0x04, 0x05
MAX_DATA, MAX_STREAM_DATA, MAX_STREAMS_BIDI, MAX_STREAMS_UNI = 0x10, 0x11, 0x12, 0x13
DATA_BLOCKED, STREAM_DATA_BLOCKED, STREAMS_BLOCKED_BIDI, STREAMS_BLOCKED_UNI = 0x14, 0x15, 0x16, 0x17
CLOSE_TRANSPORT, CLOSE_APPLICATION = 0x1C, 0x1D
DATAGRAM, DATAGRAM_LEN = 0x30, 0x31
QX_TRANSPORT_PARAMETERS = 0x3F5153300D0A0D0A
QX_PING, QX_PONG = 0x348C67529EF8C7BD, 0x348C67529EF8C7BE
PROHIBITED = {0x01: "PING", 0x02: "ACK", 0x03: "ACK", 0x06: "CRYPTO", 0x07: "NEW_TOKEN",
              0x18: "NEW_CONNECTION_ID", 0x19: "RETIRE_CONNECTION_ID", 0x1A: "PATH_CHALLENGE",
              0x1B: "PATH_RESPONSE", 0x1E: "HANDSHAKE_DONE"}

# Transport parameters (RFC 9000 sec. 18.2, RFC 9221, draft sec. 5.2).
TP_IDLE, TP_MAX_DATA, TP_BIDI_LOCAL, TP_BIDI_REMOTE, TP_UNI = 0x01, 0x04, 0x05, 0x06, 0x07
TP_STREAMS_BIDI, TP_STREAMS_UNI, TP_DATAGRAM, TP_RECORD = 0x08, 0x09, 0x20, 0x0571C59429CD0845
TP_PROHIBITED = {0x00, 0x02, 0x03, 0x0A, 0x0B, 0x0C, 0x0D, 0x0E, 0x0F, 0x10}
DEFAULT_RECORD = 16382

# Transport error codes (RFC 9000 sec. 20.1).
ERRORS = {0x00: "NO_ERROR", 0x01: "INTERNAL_ERROR", 0x03: "FLOW_CONTROL_ERROR", 0x04: "STREAM_LIMIT_ERROR",
          0x05: "STREAM_STATE_ERROR", 0x06: "FINAL_SIZE_ERROR", 0x07: "FRAME_ENCODING_ERROR",
          0x08: "TRANSPORT_PARAMETER_ERROR", 0x0A: "PROTOCOL_VIOLATION"}
FLOW_CONTROL_ERROR, STREAM_LIMIT_ERROR, STREAM_STATE_ERROR, FINAL_SIZE_ERROR = 0x03, 0x04, 0x05, 0x06
FRAME_ENCODING_ERROR, TRANSPORT_PARAMETER_ERROR, PROTOCOL_VIOLATION = 0x07, 0x08, 0x0A

VARINT_MAX = (1 << 62) - 1


def put_varint(value, out):
    if value < 0 or value > VARINT_MAX:
        raise ValueError("varint out of range")
    if value < 1 << 6:
        out.append(value)
    elif value < 1 << 14:
        out += (value | 0x4000).to_bytes(2, "big")
    elif value < 1 << 30:
        out += (value | 0x80000000).to_bytes(4, "big")
    else:
        out += (value | 0xC000000000000000).to_bytes(8, "big")


def varint(value):
    out = bytearray()
    put_varint(value, out)
    return bytes(out)


class QMuxProtocolError(Exception):
    def __init__(self, code, message, frame_type=0):
        super().__init__(message)
        self.code, self.message, self.frame_type = code, message, frame_type


class Truncated(Exception):
    pass


class Cursor:
    def __init__(self, data, pos=0, end=None):
        self.data, self.pos, self.end = data, pos, len(data) if end is None else end

    def varint(self):
        if self.pos >= self.end:
            raise Truncated()
        first = self.data[self.pos]
        length = 1 << (first >> 6)
        if self.pos + length > self.end:
            raise Truncated()
        value = first & 0x3F
        for i in range(1, length):
            value = (value << 8) | self.data[self.pos + i]
        self.pos += length
        return value, length

    def take(self, count):
        if count > self.end - self.pos:
            raise Truncated()
        chunk = bytes(self.data[self.pos:self.pos + count])
        self.pos += count
        return chunk

    def rest(self):
        return self.take(self.end - self.pos)


def encode_tp(params):
    out = bytearray()
    for key, value in params.items():
        put_varint(key, out)
        put_varint(len(varint(value)), out)
        put_varint(value, out)
    return bytes(out)


def decode_tp(payload):
    def fail(message):
        return QMuxProtocolError(TRANSPORT_PARAMETER_ERROR, message, QX_TRANSPORT_PARAMETERS)

    params, cursor = {}, Cursor(payload)
    try:
        while cursor.pos < cursor.end:
            key, _ = cursor.varint()
            length, _ = cursor.varint()
            value = cursor.take(length)
            if key in params:
                raise fail("duplicate transport parameter 0x%x" % key)
            if key in TP_PROHIBITED:
                raise fail("transport parameter 0x%x is prohibited in QMux" % key)
            if key in (TP_IDLE, TP_MAX_DATA, TP_BIDI_LOCAL, TP_BIDI_REMOTE, TP_UNI, TP_STREAMS_BIDI,
                       TP_STREAMS_UNI, TP_DATAGRAM, TP_RECORD):
                inner = Cursor(value)
                number, used = inner.varint()
                if used != len(value):
                    raise fail("transport parameter 0x%x is not one varint" % key)
                if key in (TP_STREAMS_BIDI, TP_STREAMS_UNI) and number > 1 << 60:
                    raise fail("initial_max_streams above 2^60")
                if key == TP_RECORD and number < DEFAULT_RECORD:
                    raise fail("max_record_size %d below 16382" % number)
                params[key] = number
            else:
                params[key] = None  # unknown: ignored (remembered only to detect duplicates)
    except Truncated:
        raise fail("truncated transport parameters")
    return {k: v for k, v in params.items() if v is not None}


def frame(type_, *fields, data=b""):
    out = bytearray(varint(type_))
    for field in fields:
        put_varint(field, out)
    return bytes(out) + data


def record(frames):
    body = b"".join(frames)
    return varint(len(body)) + body


class Stream:
    def __init__(self, send_max, recv_window):
        self.send_max, self.sent, self.send_buf = send_max, 0, bytearray()
        self.fin_queued = self.fin_sent = self.reset_sent = False
        self.blocked_at = None
        self.recv_offset, self.recv_max, self.recv_window = 0, recv_window, recv_window
        self.consumed, self.final_size, self.reset_received = 0, None, False


class Session:
    """The QMux state machine of one connection (independent of the Swift implementation)."""

    def __init__(self, role, params):
        self.role, self.local, self.peer = role, params, None
        self.out = bytearray(record([frame(QX_TRANSPORT_PARAMETERS, len(encode_tp(params)), data=encode_tp(params))]))
        self.inbuf = bytearray()
        self.streams, self.order = {}, []
        self.next_local_bidi = 0
        self.peer_opened_bidi = self.peer_opened_uni = 0
        self.local_limit_bidi = 0
        self.peer_limit_bidi = params.get(TP_STREAMS_BIDI, 0)
        self.peer_limit_uni = params.get(TP_STREAMS_UNI, 0)
        self.peer_closed_bidi = 0
        self.conn_send_max = self.conn_sent = 0
        self.conn_recv_max = params.get(TP_MAX_DATA, 0)
        self.conn_recv = self.conn_consumed = 0
        self.control, self.datagrams = [], []
        self.max_data_due = False
        self.pong_due = None
        self.closed = None  # ("local"|"peer", kind, code, frame_type, reason)
        self.events = []

    # ---- input ----
    def receive(self, data):
        if self.closed:
            return
        self.inbuf += data
        try:
            while not self.closed:
                cursor = Cursor(self.inbuf)
                try:
                    size, used = cursor.varint()
                except Truncated:
                    return
                limit = self.local.get(TP_RECORD, DEFAULT_RECORD)
                if size > limit:
                    raise QMuxProtocolError(FRAME_ENCODING_ERROR, "record Size %d above max_record_size %d" % (size, limit))
                if size == 0:
                    raise QMuxProtocolError(PROTOCOL_VIOLATION, "empty record")
                if len(self.inbuf) < used + size:
                    return
                body = bytes(self.inbuf[used:used + size])
                del self.inbuf[:used + size]
                self.process(body)
        except QMuxProtocolError as error:
            self.fail(error)

    def fail(self, error):
        if self.closed:
            return
        reason = error.message.encode()[:512]
        self.out += record([frame(CLOSE_TRANSPORT, error.code, error.frame_type, len(reason), data=reason)])
        self.closed = ("local", "transport", error.code, error.frame_type, error.message)

    def process(self, body):
        cursor = Cursor(body)
        while cursor.pos < cursor.end and not self.closed:
            start = cursor.pos
            try:
                type_, used = cursor.varint()
            except Truncated:
                raise QMuxProtocolError(FRAME_ENCODING_ERROR, "truncated frame type")
            if self.peer is None and type_ != QX_TRANSPORT_PARAMETERS:
                raise QMuxProtocolError(TRANSPORT_PARAMETER_ERROR,
                                        "first frame is type 0x%x, not QX_TRANSPORT_PARAMETERS" % type_, type_)
            if used != len(varint(type_)):
                raise QMuxProtocolError(PROTOCOL_VIOLATION, "frame type not minimally encoded", type_)
            try:
                self.handle(type_, cursor, cursor.pos - start)
            except Truncated:
                raise QMuxProtocolError(FRAME_ENCODING_ERROR, "frame 0x%x truncated at the end of its record" % type_, type_)

    def handle(self, t, c, _):
        if t == QX_TRANSPORT_PARAMETERS:
            length, _ = c.varint()
            payload = c.take(length)
            if self.peer is not None:
                raise QMuxProtocolError(TRANSPORT_PARAMETER_ERROR, "second QX_TRANSPORT_PARAMETERS", t)
            self.peer = decode_tp(payload)
            self.conn_send_max = self.peer.get(TP_MAX_DATA, 0)
            self.local_limit_bidi = self.peer.get(TP_STREAMS_BIDI, 0)
            self.events.append(("parameters", self.peer))
        elif t == PADDING:
            while c.pos < c.end and c.data[c.pos] == 0:
                c.pos += 1
        elif t in PROHIBITED:
            raise QMuxProtocolError(FRAME_ENCODING_ERROR, "prohibited frame %s" % PROHIBITED[t], t)
        elif t == QX_PING:
            seq, _ = c.varint()
            self.pong_due = seq if self.pong_due is None else max(self.pong_due, seq)
        elif t == QX_PONG:
            seq, _ = c.varint()
            self.events.append(("pong", seq))
        elif 0x08 <= t <= 0x0F:
            sid, _ = c.varint()
            offset = c.varint()[0] if t & 0x04 else 0
            data = c.take(c.varint()[0]) if t & 0x02 else c.rest()
            if offset + len(data) > VARINT_MAX:
                raise QMuxProtocolError(FRAME_ENCODING_ERROR, "stream data beyond 2^62-1", t)
            self.on_stream(t, sid, offset, data, bool(t & 0x01))
        elif t == RESET_STREAM:
            sid, code, final = c.varint()[0], c.varint()[0], c.varint()[0]
            stream = self.stream_for(sid, True, t)
            if stream is None or stream.reset_received:
                return
            if (stream.final_size is not None and stream.final_size != final) or final < stream.recv_offset:
                raise QMuxProtocolError(FINAL_SIZE_ERROR, "bad final size in RESET_STREAM", t)
            if final > stream.recv_max or self.conn_recv + final - stream.recv_offset > self.conn_recv_max:
                raise QMuxProtocolError(FLOW_CONTROL_ERROR, "RESET_STREAM final size beyond credit", t)
            self.conn_recv += final - stream.recv_offset
            self.consume_conn(final - stream.recv_offset)
            stream.recv_offset = stream.final_size = final
            stream.reset_received = True
            self.events.append(("reset", sid, code))
        elif t == STOP_SENDING:
            sid, code = c.varint()[0], c.varint()[0]
            stream = self.stream_for(sid, False, t)
            if stream is not None and not (stream.fin_sent or stream.reset_sent):
                stream.reset_sent = True
                stream.send_buf.clear()
                self.control.append(frame(RESET_STREAM, sid, code, stream.sent))
        elif t == MAX_DATA:
            self.conn_send_max = max(self.conn_send_max, c.varint()[0])
        elif t == MAX_STREAM_DATA:
            sid, maximum = c.varint()[0], c.varint()[0]
            stream = self.stream_for(sid, False, t)
            if stream is not None:
                stream.send_max = max(stream.send_max, maximum)
        elif t in (MAX_STREAMS_BIDI, MAX_STREAMS_UNI, STREAMS_BLOCKED_BIDI, STREAMS_BLOCKED_UNI):
            value = c.varint()[0]
            if value > 1 << 60:
                raise QMuxProtocolError(FRAME_ENCODING_ERROR, "stream count above 2^60", t)
            if t == MAX_STREAMS_BIDI:
                self.local_limit_bidi = max(self.local_limit_bidi, value)
        elif t == DATA_BLOCKED:
            c.varint()
        elif t == STREAM_DATA_BLOCKED:
            sid = c.varint()[0]
            c.varint()
            self.stream_for(sid, True, t)
        elif t in (CLOSE_TRANSPORT, CLOSE_APPLICATION):
            code = c.varint()[0]
            frame_type = c.varint()[0] if t == CLOSE_TRANSPORT else None
            reason = c.take(c.varint()[0]).decode("utf-8", "replace")
            self.closed = ("peer", "transport" if t == CLOSE_TRANSPORT else "application", code, frame_type, reason)
        elif t in (DATAGRAM, DATAGRAM_LEN):
            start = c.pos
            data = c.take(c.varint()[0]) if t == DATAGRAM_LEN else c.rest()
            size = len(varint(t)) + (c.pos - start)
            limit = self.local.get(TP_DATAGRAM, 0)
            if limit == 0 or size > limit:
                raise QMuxProtocolError(PROTOCOL_VIOLATION, "DATAGRAM not negotiated or larger than %d" % limit, t)
            self.events.append(("datagram", data))
        else:
            raise QMuxProtocolError(FRAME_ENCODING_ERROR, "unknown frame type 0x%x" % t, t)

    def is_local(self, sid):
        return (sid & 1) == (0 if self.role == "client" else 1)

    def stream_for(self, sid, receiving, t):
        local, bidi = self.is_local(sid), (sid & 2) == 0
        if not bidi and local == receiving:
            raise QMuxProtocolError(STREAM_STATE_ERROR, "frame for the wrong direction of stream %d" % sid, t)
        index = sid >> 2
        if local:
            if not bidi or index >= self.next_local_bidi:
                raise QMuxProtocolError(STREAM_STATE_ERROR, "stream %d not opened" % sid, t)
            return self.streams.get(sid)
        opened = self.peer_opened_bidi if bidi else self.peer_opened_uni
        limit = self.peer_limit_bidi if bidi else self.peer_limit_uni
        while index >= opened:
            if opened >= limit:
                raise QMuxProtocolError(STREAM_LIMIT_ERROR, "stream %d beyond the limit %d" % (sid, limit), t)
            new_id = (opened << 2) | (1 if self.role == "client" else 0) | (0 if bidi else 2)
            if bidi:
                stream = Stream(self.peer.get(TP_BIDI_LOCAL, 0), self.local.get(TP_BIDI_REMOTE, 0))
            else:
                stream = Stream(0, self.local.get(TP_UNI, 0))
                stream.fin_sent = True  # no sending part
            self.streams[new_id] = stream
            self.events.append(("opened", new_id))
            opened += 1
            if bidi:
                self.peer_opened_bidi = opened
            else:
                self.peer_opened_uni = opened
        return self.streams.get(sid)

    def on_stream(self, t, sid, offset, data, fin):
        stream = self.stream_for(sid, True, t)
        if stream is None:
            return
        end = offset + len(data)
        if stream.final_size is not None and (end > stream.final_size or (fin and end != stream.final_size)):
            raise QMuxProtocolError(FINAL_SIZE_ERROR, "stream %d data beyond its final size" % sid, t)
        if stream.reset_received:
            return
        if offset != stream.recv_offset:
            raise QMuxProtocolError(PROTOCOL_VIOLATION,
                                    "stream %d offset %d, expected %d (in-order rule)" % (sid, offset, stream.recv_offset), t)
        if end > stream.recv_max:
            raise QMuxProtocolError(FLOW_CONTROL_ERROR, "stream %d beyond MAX_STREAM_DATA" % sid, t)
        if self.conn_recv + len(data) > self.conn_recv_max:
            raise QMuxProtocolError(FLOW_CONTROL_ERROR, "connection beyond MAX_DATA", t)
        self.conn_recv += len(data)
        stream.recv_offset = end
        if fin:
            stream.final_size = end
        if data or fin:
            self.events.append(("data", sid, data, fin))

    # ---- application side ----
    def consume(self, sid, count):
        stream = self.streams.get(sid)
        if stream is not None and stream.final_size is None and stream.recv_window:
            stream.consumed += count
            if stream.recv_max - stream.consumed < stream.recv_window // 2:
                stream.recv_max = stream.consumed + stream.recv_window
                self.control.append(frame(MAX_STREAM_DATA, sid, stream.recv_max))
        self.consume_conn(count)

    def consume_conn(self, count):
        self.conn_consumed += count
        window = self.local.get(TP_MAX_DATA, 0)
        if window and self.conn_recv_max - self.conn_consumed < window // 2:
            self.conn_recv_max = self.conn_consumed + window
            self.max_data_due = True

    def open_bidi(self):
        if self.peer is None or self.next_local_bidi >= self.local_limit_bidi:
            return None
        sid = (self.next_local_bidi << 2) | (0 if self.role == "client" else 1)
        self.next_local_bidi += 1
        self.streams[sid] = Stream(self.peer.get(TP_BIDI_REMOTE, 0), self.local.get(TP_BIDI_LOCAL, 0))
        return sid

    def write(self, sid, data, fin=False):
        stream = self.streams[sid]
        if stream.fin_queued or stream.reset_sent:
            return
        stream.send_buf += data
        stream.fin_queued = stream.fin_queued or fin
        if sid not in self.order:
            self.order.append(sid)

    def send_datagram(self, data):
        limit = min(self.peer.get(TP_DATAGRAM, 0) if self.peer else 0, self.peer_record_size())
        if not self.local.get(TP_DATAGRAM, 0) or len(varint(DATAGRAM_LEN)) + len(varint(len(data))) + len(data) > limit:
            return False
        self.datagrams.append(frame(DATAGRAM_LEN, len(data), data=data))
        return True

    def close(self, code, reason):
        if self.closed:
            return
        self.flush()
        raw = reason.encode()
        self.out += record([frame(CLOSE_APPLICATION, code, len(raw), data=raw)])
        self.closed = ("local", "application", code, None, reason)

    def peer_record_size(self):
        return (self.peer or {}).get(TP_RECORD, DEFAULT_RECORD)

    # ---- output ----
    def flush(self):
        """Frames what may be sent now into self.out; returns the consumed (echo) bytes per stream."""
        if self.closed:
            return
        target = min(self.peer_record_size(), DEFAULT_RECORD)
        frames = []
        if self.pong_due is not None:
            frames.append(frame(QX_PONG, self.pong_due))
            self.pong_due = None
        frames += self.control
        self.control = []
        if self.max_data_due:
            frames.append(frame(MAX_DATA, self.conn_recv_max))
            self.max_data_due = False
        if self.peer is not None:
            frames += self.datagrams
            self.datagrams = []
            progress = True
            while progress:
                progress = False
                for sid in list(self.order):
                    stream = self.streams[sid]
                    if stream.reset_sent or stream.fin_sent:
                        self.order.remove(sid)
                        continue
                    credit = min(stream.send_max - stream.sent, self.conn_send_max - self.conn_sent, target - 32)
                    count = min(len(stream.send_buf), credit)
                    fin = stream.fin_queued and count == len(stream.send_buf)
                    if count <= 0 and not fin:
                        if stream.send_max == stream.sent and stream.blocked_at != stream.send_max:
                            stream.blocked_at = stream.send_max
                            frames.append(frame(STREAM_DATA_BLOCKED, sid, stream.send_max))
                        continue
                    chunk = bytes(stream.send_buf[:count])
                    del stream.send_buf[:count]
                    type_ = 0x0A | (0x04 if stream.sent else 0) | (0x01 if fin else 0)
                    fields = [sid, stream.sent, count] if stream.sent else [sid, count]
                    frames.append(frame(type_, *fields, data=chunk))
                    stream.sent += count
                    self.conn_sent += count
                    self.events.append(("sent", sid, count))
                    if fin:
                        stream.fin_sent = True
                        self.order.remove(sid)
                    progress = True
        body = bytearray()
        for f in frames:
            if body and len(body) + len(f) > target:
                self.out += varint(len(body)) + body
                body = bytearray()
            body += f
        if body:
            self.out += varint(len(body)) + body

    def take_output(self):
        self.flush()
        data = bytes(self.out)
        self.out.clear()
        return data


def describe_close(closed):
    side, kind, code, frame_type, reason = closed
    if kind == "transport":
        return "%s transport close: %s (0x%x), frame type 0x%x, reason %r" % (
            side, ERRORS.get(code, "error"), code, frame_type or 0, reason)
    return "%s application close: code 0x%x, reason %r" % (side, code, reason)


def server_params(args):
    return {TP_IDLE: args.idle_ms, TP_MAX_DATA: 16 << 20, TP_BIDI_LOCAL: 1 << 20, TP_BIDI_REMOTE: 1 << 20,
            TP_UNI: 1 << 20, TP_STREAMS_BIDI: 1000, TP_STREAMS_UNI: 100, TP_DATAGRAM: 65535}


def echo(session):
    """Echoes received stream bytes/FIN and datagrams; returns the bytes to write."""
    for event in session.events:
        if event[0] == "data":
            _, sid, payload, fin = event
            if (sid & 2) == 0:
                session.write(sid, payload, fin)
            else:
                session.consume(sid, len(payload))
        elif event[0] == "datagram":
            session.send_datagram(event[1])
    session.events = []
    out = session.take_output()
    # Echoed bytes count as consumed: the client's credit follows what it reads back.
    sent = [event for event in session.events if event[0] == "sent"]
    session.events = []
    for _, sid, count in sent:
        session.consume(sid, count)
    return out + session.take_output()


async def serve_connection(reader, writer, args):
    ssl_object = writer.get_extra_info("ssl_object")
    if ssl_object is None or ssl_object.selected_alpn_protocol() != ALPN or ssl_object.version() != "TLSv1.3":
        print("closed: ALPN %r / %r not accepted" % (ssl_object and ssl_object.selected_alpn_protocol(),
                                                    ssl_object and ssl_object.version()), flush=True)
        writer.close()
        return
    session = Session("server", server_params(args))
    misbehave(session, args.bad)
    try:
        writer.write(session.take_output() if not args.bad else bytes(session.out))
        session.out.clear()
        await writer.drain()
        while not session.closed:
            try:
                data = await asyncio.wait_for(reader.read(65536), timeout=args.idle_ms / 1000)
            except asyncio.TimeoutError:
                print("closed: idle timeout", flush=True)
                break
            if not data:
                print("closed: transport ended without CONNECTION_CLOSE", flush=True)
                break
            session.receive(data)
            if args.bad:
                session.events = []
                out = bytes(session.out)  # nothing but a CONNECTION_CLOSE, if the client's input is bad
                session.out.clear()
            else:
                out = echo(session)
            if out:
                writer.write(out)
                await writer.drain()
        if session.closed:
            print("closed: " + describe_close(session.closed), flush=True)
    except (ConnectionError, ssl.SSLError) as error:
        print("closed: transport error %s" % error, flush=True)
    finally:
        try:
            writer.close()
            await writer.wait_closed()
        except (ConnectionError, ssl.SSLError):
            pass


def misbehave(session, bad):
    """Applies a --bad mode to the session's first output."""
    if bad == "wrong-first-frame":
        session.out[:0] = record([frame(QX_PING, 0)])
    elif bad == "prohibited-frame":
        session.out += record([frame(0x02, 0, 0, 0, 0)])  # ACK: largest 0, delay 0, 0 ranges, first range 0
    elif bad == "truncated-record":
        session.out += bytes([3, MAX_STREAM_DATA, 0x00, 0x40])  # MAX_STREAM_DATA cut inside its last varint
    elif bad == "garbage":
        session.out[:] = b"\xff" * 8 + b"garbage!"  # Size 2^62-1: not QMux


def run_pipe_server(args):
    """The server session over stdin/stdout: QMux plaintext as TLS would deliver it, for sans-IO interop tests.
    Log lines go to stderr."""
    session = Session("server", server_params(args))
    misbehave(session, args.bad)
    os.write(1, bytes(session.out))
    session.out.clear()
    while not session.closed:
        data = os.read(0, 65536)
        if not data:
            print("closed: transport ended without CONNECTION_CLOSE", file=sys.stderr, flush=True)
            return
        session.receive(data)
        if args.bad:
            session.events = []
            out = bytes(session.out)
            session.out.clear()
        else:
            out = echo(session)
        while out:
            written = os.write(1, out)
            out = out[written:]
    print("closed: " + describe_close(session.closed), file=sys.stderr, flush=True)


async def run_server(args):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    context.set_alpn_protocols([ALPN])
    context.load_cert_chain(args.cert, args.key)
    server = await asyncio.start_server(lambda r, w: serve_connection(r, w, args), args.host, args.port, ssl=context)
    host, port = server.sockets[0].getsockname()[:2]
    print("listening on %s:%d" % (host, port), flush=True)
    async with server:
        await server.serve_forever()


def message_bytes(stream_index, message_index, size):
    text = ("stream %d message %d " % (stream_index, message_index)).encode()
    body = (text * (size // len(text) + 1))[:max(size, 1)]
    return varint(len(body)) + body


def count_messages(data):
    cursor, count = Cursor(data), 0
    try:
        while cursor.pos < cursor.end:
            cursor.take(cursor.varint()[0])
            count += 1
    except Truncated:
        raise RuntimeError("echoed stream ends inside a message")
    return count


async def run_client(args):
    context = ssl.create_default_context(cafile=args.ca)
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    context.set_alpn_protocols([ALPN])
    started = time.monotonic()
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection(args.host, args.port, ssl=context, server_hostname=args.server_name), args.timeout)
    alpn = writer.get_extra_info("ssl_object").selected_alpn_protocol()
    if alpn != ALPN:
        raise RuntimeError("ALPN %r negotiated, expected %r" % (alpn, ALPN))
    params = {TP_IDLE: 30000, TP_MAX_DATA: 16 << 20, TP_BIDI_LOCAL: 1 << 20, TP_BIDI_REMOTE: 1 << 20,
              TP_UNI: 1 << 20, TP_STREAMS_BIDI: 100, TP_STREAMS_UNI: 100, TP_DATAGRAM: 65535}
    session = Session("client", params)
    writer.write(session.take_output())  # QX_TRANSPORT_PARAMETERS at once, without waiting for the server's
    await writer.drain()
    sent, echoed, fins = {}, {}, set()
    pending_streams = list(range(args.streams))
    datagrams_sent = datagrams_echoed = 0
    deadline = started + args.timeout
    while True:
        if session.peer is not None:
            while pending_streams:
                sid = session.open_bidi()
                if sid is None:
                    break
                index = pending_streams.pop(0)
                payload = b"".join(message_bytes(index, m, args.size) for m in range(args.messages))
                sent[sid] = payload
                echoed[sid] = bytearray()
                session.write(sid, payload, fin=True)
            while datagrams_sent < args.datagrams:
                if not session.send_datagram(("datagram %d" % datagrams_sent).encode()):
                    raise RuntimeError("DATAGRAM not negotiated with the server")
                datagrams_sent += 1
        out = session.take_output()
        if out:
            writer.write(out)
            await writer.drain()
        if session.closed:
            raise RuntimeError(describe_close(session.closed))
        if not pending_streams and len(fins) == args.streams and datagrams_echoed >= args.datagrams:
            break
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise RuntimeError("timed out: %d/%d streams echoed, %d/%d datagrams" % (
                len(fins), args.streams, datagrams_echoed, args.datagrams))
        try:
            data = await asyncio.wait_for(reader.read(65536), timeout=remaining)
        except asyncio.TimeoutError:
            continue
        if not data:
            raise RuntimeError("server closed the transport without CONNECTION_CLOSE")
        session.receive(data)
        if session.closed and session.out:  # our CONNECTION_CLOSE for the server's protocol error
            writer.write(bytes(session.out))
            await writer.drain()
        for event in session.events:
            if event[0] == "data":
                _, sid, payload, fin = event
                echoed.setdefault(sid, bytearray()).extend(payload)
                session.consume(sid, len(payload))
                if fin:
                    fins.add(sid)
            elif event[0] == "datagram":
                datagrams_echoed += 1
        session.events = []
        if session.closed:
            raise RuntimeError(describe_close(session.closed))
    for sid, payload in sent.items():
        if bytes(echoed[sid]) != payload:
            raise RuntimeError("stream %d echo differs (%d bytes sent, %d echoed)" % (sid, len(payload), len(echoed[sid])))
    messages = sum(count_messages(bytes(echoed[sid])) for sid in sent)
    session.close(0, "done")
    writer.write(session.take_output() + bytes(session.out))
    await writer.drain()
    writer.close()
    try:
        await writer.wait_closed()
    except (ConnectionError, ssl.SSLError):
        pass
    print(json.dumps({"ok": True, "alpn": alpn, "streams": len(sent), "messages_sent": args.streams * args.messages,
                      "messages_echoed": messages, "bytes_sent": sum(map(len, sent.values())),
                      "bytes_echoed": sum(len(echoed[s]) for s in sent), "datagrams_sent": datagrams_sent,
                      "datagrams_echoed": datagrams_echoed,
                      "peer_max_record_size": session.peer_record_size(),
                      "elapsed_ms": round((time.monotonic() - started) * 1000, 1)}), flush=True)


def main():
    # A parent that spawned us from a thread blocking SIGTERM passes that mask on: unblock it so stop() works.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM, signal.SIGINT])
    parser = argparse.ArgumentParser(description="QMux (draft-ietf-quic-qmux-01) test peer",
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    sub = parser.add_subparsers(dest="mode", required=True)
    server = sub.add_parser("server")
    server.add_argument("--cert", required=True)
    server.add_argument("--key", required=True)
    server.add_argument("--host", default="127.0.0.1")
    server.add_argument("--port", type=int, default=0)
    server.add_argument("--idle-ms", type=int, default=30000)
    server.add_argument("--bad", choices=["wrong-first-frame", "prohibited-frame", "truncated-record", "garbage"])
    pipe = sub.add_parser("pipe-server", help="server session on stdin/stdout, no TLS (sans-IO interop tests)")
    pipe.add_argument("--idle-ms", type=int, default=30000)
    pipe.add_argument("--bad", choices=["wrong-first-frame", "prohibited-frame", "truncated-record", "garbage"])
    client = sub.add_parser("client")
    client.add_argument("--ca", required=True)
    client.add_argument("--server-name", default="localhost")
    client.add_argument("--host", default="127.0.0.1")
    client.add_argument("--port", type=int, required=True)
    client.add_argument("--streams", type=int, default=1)
    client.add_argument("--messages", type=int, default=1, help="messages per stream")
    client.add_argument("--size", type=int, default=32, help="bytes per message body")
    client.add_argument("--datagrams", type=int, default=0)
    client.add_argument("--timeout", type=float, default=10.0)
    args = parser.parse_args()
    try:
        if args.mode == "pipe-server":
            run_pipe_server(args)
        else:
            asyncio.run(run_server(args) if args.mode == "server" else run_client(args))
    except KeyboardInterrupt:
        pass
    except Exception as error:  # one line, non-zero exit
        print("qmux_peer %s: error: %s" % (args.mode, error), file=sys.stderr, flush=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
