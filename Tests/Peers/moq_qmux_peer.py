#!/usr/bin/env python3
"""moq-dev's QMux (the `moq-ffi` wheel, Rust) as a peer of ours, watched on the wire.

moq-dev's stack speaks QMux in two forms a client can dial through the binding: `tcp://host:port`, QMux
draft-ietf-quic-qmux-01 records straight on TCP with no TLS (its wire version is fixed, the application protocol
travels in-band in an extension transport parameter), and `ws://` / `wss://`, QMux over WebSocket
(draft-lcurley-qmux-websocket). Our relay speaks QMux draft-01 inside TLS 1.3 on TCP (ALPN ptt/1-qx01). So this
script puts a TLS bridge between the two: their client dials `tcp://` to the bridge, the bridge opens a TLS 1.3
connection to our relay (certificate verified against --ca for --server-name, ALPN --alpn) and copies the QMux
bytes both ways unchanged. The bridge parses every record it copies, in both directions, without changing one
byte, so what each side sent is read from the wire: the first frame, the transport parameters, STREAM data per
stream (offsets checked for order), RESET_STREAM, STOP_SENDING, DATAGRAM, QX_PING, CONNECTION_CLOSE, and how each
direction ended.

The binding is a MoQ (Media over QUIC) API: a client session opens its own streams and speaks MoQ on them, and
datagrams exist only as MoQ track objects. An echo relay is not a MoQ server, so their MoQ layer ends the session
after reading our echo of its setup message; the QMux exchange before that is what this peer measures.

Modes
  client  Their client against our relay through the bridge (with --direct: straight to our relay's TLS port, no
          bridge, to see what a plaintext QMux client meets there). Prints one JSON line:
            {"moq_ffi", "mode", "url", "connect": {"ok", "ms", "error", "moq_error"},
             "tls": {"version", "alpn", "cipher"},
             "client": WIRE, "server": WIRE, "echo": [{"stream", "sent", "echoed", "identical"}]}
          where WIRE (what that side sent) is {"records", "largest_record", "first_frame",
          "transport_parameters", "application_protocols", "frames", "streams", "datagrams", "pings", "pongs",
          "close", "end", "unfinished_record_bytes", "violations"}. Exit 0 once it ran (whatever their client
          concluded), 1 when it could not.
  server-probe  Whether the binding's server can accept QMux on TCP: tries MoqServer.set_bind("tcp://...") and
          lists which sockets a MoqServer bound to 127.0.0.1:0 opens. One JSON line: {"moq_ffi", "qmux_listener",
          "tcp_bind_error", "bound", "sockets"}.

Examples
  moq_qmux_peer.py client --relay-port 4433 --ca certs/ca.pem
  moq_qmux_peer.py client --relay-port 4433 --ca certs/ca.pem --direct
  moq_qmux_peer.py server-probe
"""

import argparse
import asyncio
import hashlib
import importlib.metadata
import json
import os
import ssl
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qmux_peer as q  # noqa: E402  (the draft's code points and the varint reader)

TP_NAMES = {q.TP_IDLE: "max_idle_timeout", q.TP_MAX_DATA: "initial_max_data",
            q.TP_BIDI_LOCAL: "initial_max_stream_data_bidi_local",
            q.TP_BIDI_REMOTE: "initial_max_stream_data_bidi_remote", q.TP_UNI: "initial_max_stream_data_uni",
            q.TP_STREAMS_BIDI: "initial_max_streams_bidi", q.TP_STREAMS_UNI: "initial_max_streams_uni",
            q.TP_DATAGRAM: "max_datagram_frame_size", q.TP_RECORD: "max_record_size"}
# moq-dev's in-band application protocol list (qmux crate, plaintext transports only); not in any QMux draft.
TP_APPLICATION_PROTOCOLS = 0x3D4F9C2A8B1E6075
FRAME_NAMES = {q.PADDING: "PADDING", q.RESET_STREAM: "RESET_STREAM", q.STOP_SENDING: "STOP_SENDING",
               q.MAX_DATA: "MAX_DATA", q.MAX_STREAM_DATA: "MAX_STREAM_DATA", q.MAX_STREAMS_BIDI: "MAX_STREAMS",
               q.MAX_STREAMS_UNI: "MAX_STREAMS", q.DATA_BLOCKED: "DATA_BLOCKED",
               q.STREAM_DATA_BLOCKED: "STREAM_DATA_BLOCKED", q.STREAMS_BLOCKED_BIDI: "STREAMS_BLOCKED",
               q.STREAMS_BLOCKED_UNI: "STREAMS_BLOCKED", q.CLOSE_TRANSPORT: "CONNECTION_CLOSE",
               q.CLOSE_APPLICATION: "CONNECTION_CLOSE", q.DATAGRAM: "DATAGRAM", q.DATAGRAM_LEN: "DATAGRAM",
               q.QX_TRANSPORT_PARAMETERS: "QX_TRANSPORT_PARAMETERS", q.QX_PING: "QX_PING", q.QX_PONG: "QX_PING"}


def moq_ffi_version():
    try:
        return importlib.metadata.version("moq-ffi")
    except importlib.metadata.PackageNotFoundError:
        return None


class Wire:
    """What one side sent, read record by record from the bytes the bridge copies (never changed)."""

    def __init__(self):
        self.buffer = bytearray()
        self.records = self.largest = 0
        self.first_frame = None
        self.parameters = None
        self.protocols = None
        self.frames = {}
        self.streams = {}
        self.datagrams, self.pings, self.pongs = [], [], []
        self.close = None
        self.end = "open"
        self.violations = []
        self.unreadable = False

    def feed(self, data):
        if self.unreadable:
            return
        self.buffer += data
        while True:
            cursor = q.Cursor(self.buffer)
            try:
                size, used = cursor.varint()
            except q.Truncated:
                return
            if len(self.buffer) < used + size:
                return
            body = bytes(self.buffer[used:used + size])
            del self.buffer[:used + size]
            self.records += 1
            self.largest = max(self.largest, size)
            if size == 0:
                self.violations.append("empty record")
                continue
            try:
                self.frames_in(body)
            except q.Truncated:
                self.violations.append("record %d ends inside a frame" % self.records)
            except ValueError as error:
                self.violations.append(str(error))
                self.unreadable = True
                return

    def frames_in(self, body):
        cursor = q.Cursor(body)
        while cursor.pos < cursor.end:
            kind, _ = cursor.varint()
            name = FRAME_NAMES.get(kind, "STREAM" if 0x08 <= kind <= 0x0F else None)
            if name is None:
                raise ValueError("frame type 0x%x not read (the rest of this direction is left unparsed)" % kind)
            if self.first_frame is None:
                self.first_frame = name
            self.frames[name] = self.frames.get(name, 0) + 1
            self.frame(kind, cursor)

    def frame(self, kind, c):
        if kind == q.QX_TRANSPORT_PARAMETERS:
            self.transport_parameters(c.take(c.varint()[0]))
        elif kind == q.PADDING:
            while c.pos < c.end and c.data[c.pos] == 0:
                c.pos += 1
        elif 0x08 <= kind <= 0x0F:
            sid = c.varint()[0]
            offset = c.varint()[0] if kind & 0x04 else 0
            data = c.take(c.varint()[0]) if kind & 0x02 else c.rest()
            stream = self.stream(sid)
            if offset != len(stream["data"]):
                self.violations.append("stream %d: data at offset %d, expected %d (draft sec. 4.1)"
                                       % (sid, offset, len(stream["data"])))
            stream["data"] += data
            stream["fin"] = stream["fin"] or bool(kind & 0x01)
        elif kind == q.RESET_STREAM:
            sid, code, final = c.varint()[0], c.varint()[0], c.varint()[0]
            self.stream(sid)["reset"] = {"code": code, "final_size": final}
        elif kind == q.STOP_SENDING:
            sid, code = c.varint()[0], c.varint()[0]
            self.stream(sid)["stop_sending"] = code
        elif kind in (q.MAX_DATA, q.MAX_STREAMS_BIDI, q.MAX_STREAMS_UNI, q.DATA_BLOCKED, q.STREAMS_BLOCKED_BIDI,
                      q.STREAMS_BLOCKED_UNI):
            c.varint()
        elif kind in (q.MAX_STREAM_DATA, q.STREAM_DATA_BLOCKED):
            c.varint(), c.varint()
        elif kind in (q.CLOSE_TRANSPORT, q.CLOSE_APPLICATION):
            code = c.varint()[0]
            frame_type = c.varint()[0] if kind == q.CLOSE_TRANSPORT else None
            reason = c.take(c.varint()[0]).decode("utf-8", "replace")
            self.close = {"type": "0x%x" % kind, "code": code, "name": q.ERRORS.get(code) if frame_type is not None
                          else None, "frame_type": frame_type, "reason": reason}
        elif kind in (q.DATAGRAM, q.DATAGRAM_LEN):
            data = c.take(c.varint()[0]) if kind == q.DATAGRAM_LEN else c.rest()
            self.datagrams.append({"type": "0x%x" % kind, "bytes": len(data)})
        elif kind in (q.QX_PING, q.QX_PONG):
            (self.pings if kind == q.QX_PING else self.pongs).append(c.varint()[0])

    def transport_parameters(self, payload):
        params, cursor = {}, q.Cursor(payload)
        while cursor.pos < cursor.end:
            key = cursor.varint()[0]
            value = cursor.take(cursor.varint()[0])
            if key in TP_NAMES:
                params[TP_NAMES[key]] = q.Cursor(value).varint()[0]
            elif key == TP_APPLICATION_PROTOCOLS:
                self.protocols, inner = [], q.Cursor(value)
                while inner.pos < inner.end:
                    self.protocols.append(inner.take(inner.varint()[0]).decode("utf-8", "replace"))
                params["0x%x" % key] = "%d bytes" % len(value)
            else:
                params["0x%x" % key] = "%d bytes" % len(value)
        if self.parameters is not None:
            self.violations.append("a second QX_TRANSPORT_PARAMETERS (draft sec. 4.2)")
        self.parameters = params

    def stream(self, sid):
        return self.streams.setdefault(sid, {"data": bytearray(), "fin": False, "reset": None,
                                             "stop_sending": None})

    def summary(self):
        streams = {}
        for sid, stream in self.streams.items():
            streams[str(sid)] = {"bytes": len(stream["data"]), "fin": stream["fin"], "reset": stream["reset"],
                                 "stop_sending": stream["stop_sending"],
                                 "sha256": hashlib.sha256(stream["data"]).hexdigest()[:16]}
        # Bytes of an unfinished record when the direction ended are no violation: the other side may have closed
        # the connection while this record was on its way.
        return {"records": self.records, "largest_record": self.largest, "first_frame": self.first_frame,
                "transport_parameters": self.parameters, "application_protocols": self.protocols,
                "frames": self.frames, "streams": streams, "datagrams": self.datagrams, "pings": self.pings,
                "pongs": self.pongs, "close": self.close, "end": self.end,
                "unfinished_record_bytes": len(self.buffer), "violations": self.violations}


class Bridge:
    """Plain TCP from their client on one side, TLS 1.3 to our relay on the other; copies bytes and watches."""

    def __init__(self, args):
        self.args = args
        self.client, self.server = Wire(), Wire()
        self.tls = None
        self.error = None
        self.done = asyncio.Event()
        self.connections = 0

    async def start(self):
        self.listener = await asyncio.start_server(self.accept, "127.0.0.1", 0)
        return self.listener.sockets[0].getsockname()[1]

    async def accept(self, their_reader, their_writer):
        self.connections += 1
        if self.connections > 1:  # one connection is the experiment; a redial is refused
            their_writer.close()
            return
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.minimum_version = ssl.TLSVersion.TLSv1_3
        context.load_verify_locations(self.args.ca)
        context.set_alpn_protocols([self.args.alpn])
        try:
            relay_reader, relay_writer = await asyncio.open_connection(
                self.args.relay_host, self.args.relay_port, ssl=context, server_hostname=self.args.server_name)
        except (OSError, ssl.SSLError) as error:
            self.error = "TLS to the relay failed: %s" % error
            their_writer.close()
            self.done.set()
            return
        tls = relay_writer.get_extra_info("ssl_object")
        self.tls = {"version": tls.version(), "alpn": tls.selected_alpn_protocol(), "cipher": tls.cipher()[0]}
        await asyncio.gather(self.copy(their_reader, relay_writer, self.client),
                             self.copy(relay_reader, their_writer, self.server))
        self.done.set()

    async def copy(self, reader, writer, wire):
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    wire.end = "eof"
                    break
                wire.feed(data)
                writer.write(data)
                await writer.drain()
        except (ConnectionError, ssl.SSLError) as error:
            wire.end = "reset: %s" % error.__class__.__name__
        finally:
            try:
                writer.close()
            except (ConnectionError, ssl.SSLError, RuntimeError):
                pass


def describe_moq_error(error):
    details = getattr(error, "details", None)
    if details is None or not hasattr(details, "kind"):
        return None
    return {"scope": str(details.scope), "code": details.code, "kind": str(details.kind),
            "message": details.message}


async def run_client(args):
    import moq_ffi  # the wheel under test

    if args.log:
        moq_ffi.moq_log_level(args.log)
    bridge = None
    if args.direct:
        url = "tcp://%s:%d" % (args.relay_host, args.relay_port)
    else:
        bridge = Bridge(args)
        url = "tcp://127.0.0.1:%d" % await bridge.start()
    client = moq_ffi.MoqClient()
    client.set_reconnect(False)
    connect = {"ok": False, "ms": None, "error": None, "moq_error": None}
    started = time.monotonic()
    try:
        session = await asyncio.wait_for(client.connect(url), args.timeout)
        connect["ok"] = True
        session.cancel(0)
    except asyncio.TimeoutError:
        client.cancel()
        connect["error"] = "no session within %.0f s" % args.timeout
    except Exception as error:  # the binding's MoqError variants
        connect["error"] = repr(error)
        connect["moq_error"] = describe_moq_error(error)
    connect["ms"] = round((time.monotonic() - started) * 1000, 1)
    result = {"moq_ffi": moq_ffi_version(), "mode": "direct" if args.direct else "bridged", "url": url,
              "connect": connect}
    if bridge is not None:
        try:
            await asyncio.wait_for(bridge.done.wait(), args.timeout)
        except asyncio.TimeoutError:
            pass
        bridge.listener.close()
        client_wire, server_wire = bridge.client.summary(), bridge.server.summary()
        echoes = []
        for sid, stream in bridge.client.streams.items():
            back = bridge.server.streams.get(sid)
            if stream["data"] and sid % 2 == 0:  # a bidirectional stream their client opened
                echoed = bytes(back["data"]) if back else b""
                echoes.append({"stream": sid, "sent": len(stream["data"]), "echoed": len(echoed),
                               "identical": echoed == bytes(stream["data"])})
        result.update({"tls": bridge.tls, "bridge_error": bridge.error, "client": client_wire,
                       "server": server_wire, "echo": echoes})
    print(json.dumps(result), flush=True)
    return 0


def sockets_on_port(port):
    """Which of /proc/net/{tcp,udp}{,6} hold a socket on `port` (the probe needs no `ss`)."""
    found = []
    for name in ("tcp", "tcp6", "udp", "udp6"):
        try:
            with open("/proc/net/" + name) as table:
                for line in table.readlines()[1:]:
                    local = line.split()[1]
                    if int(local.rsplit(":", 1)[1], 16) == port:
                        found.append(name)
        except OSError:
            pass
    return sorted(set(found))


async def run_server_probe(args):
    import moq_ffi

    result = {"moq_ffi": moq_ffi_version(), "qmux_listener": False, "tcp_bind_error": None, "bound": None,
              "sockets": []}
    server = moq_ffi.MoqServer()
    try:
        server.set_bind("tcp://127.0.0.1:0")
        result["tcp_bind_error"] = None
    except Exception as error:
        result["tcp_bind_error"] = repr(error)
    server.cancel()
    server = moq_ffi.MoqServer()
    try:
        server.set_bind("127.0.0.1:0")
        server.set_tls_generate(["localhost"])
        result["bound"] = await asyncio.wait_for(server.listen(), args.timeout)
        result["sockets"] = sockets_on_port(int(result["bound"].rsplit(":", 1)[1]))
        result["qmux_listener"] = any(name.startswith("tcp") for name in result["sockets"])
    except Exception as error:
        result["listen_error"] = repr(error)
    finally:
        server.cancel()
    print(json.dumps(result), flush=True)
    return 0


def main():
    parser = argparse.ArgumentParser(description="moq-dev's QMux (moq-ffi) against our relay, watched on the wire",
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    modes = parser.add_subparsers(dest="mode", required=True)
    client = modes.add_parser("client")
    client.add_argument("--relay-host", default="127.0.0.1")
    client.add_argument("--relay-port", type=int, required=True)
    client.add_argument("--ca", required=True)
    client.add_argument("--server-name", default="localhost")
    client.add_argument("--alpn", default=q.ALPN)
    client.add_argument("--direct", action="store_true", help="dial the relay's TLS port with plaintext QMux")
    client.add_argument("--timeout", type=float, default=10.0)
    client.add_argument("--log", help="moq-ffi log level (trace, debug, ...) to stderr")
    probe = modes.add_parser("server-probe")
    probe.add_argument("--timeout", type=float, default=10.0)
    args = parser.parse_args()
    try:
        import moq_ffi  # noqa: F401
    except ImportError as error:
        print("moq_qmux_peer: the moq-ffi wheel is not importable: %s" % error, file=sys.stderr)
        return 1
    runner = run_client if args.mode == "client" else run_server_probe
    try:
        return asyncio.run(runner(args))
    except (OSError, ssl.SSLError) as error:
        print("moq_qmux_peer: %s" % error, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
