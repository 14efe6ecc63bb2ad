#!/usr/bin/env python3
"""TLS records a relay's TCP port must handle before its handshake completes. Standard library only.

Client of 127.0.0.1:PORT (the relay's QMux-over-TLS port). Prints one JSON line and exits 0 (1 on a usage error).

--attack split-client-hello [--records N] [--pad BYTES]
  An honest TLS 1.3 client (ALPN ptt/1-qx01, verifying --ca for --server-name) whose ClientHello is cut into N
  handshake records sent in one write, so they arrive together. --pad appends a padding extension (RFC 7685) of
  that many bytes to the ClientHello first (a large but valid ClientHello; the client's own transcript then no
  longer matches, so only the server's answer is awaited). Prints {"answered", "answered_ms", "handshake",
  "handshake_ms", "alpn", "client_hello_bytes", "error"}: "answered" once a ServerHello arrived; "handshake" once
  the TLS handshake completed (without --pad).

--attack slow-client [--delay S]
  A real QMux client on a slow path: sends its ClientHello, waits S seconds (a mobile client's round trips), then
  completes TLS and exchanges QX_TRANSPORT_PARAMETERS. Prints {"served", "handshake", "error", "elapsed_ms"}:
  "served" once the server's parameters arrived and the connection stayed open 0.5 s after ours went.

--attack one-byte-records [--seconds S] [--max-bytes B]
  Announces a ClientHello of 131,000 bytes (under GnuTLS' 128 KiB handshake limit) and streams it, and more, in
  handshake records of one byte each, as fast as the socket takes them, until the server closes the connection,
  S seconds pass or B bytes were sent; then holds the connection open until S seconds passed, watching for the
  server's close. Prints {"bytes_sent", "closed_by_server", "elapsed_ms"} (elapsed: until the close was seen, or
  S seconds).
"""

import argparse
import json
import signal
import socket
import ssl
import struct
import time

QMUX_ALPN = "ptt/1-qx01"
HANDSHAKE = 0x16


def records(data):
    """(type, body) of each complete TLS record in data."""
    out = []
    offset = 0
    while offset + 5 <= len(data):
        length = struct.unpack("!H", data[offset + 3:offset + 5])[0]
        out.append((data[offset], data[offset + 5:offset + 5 + length]))
        offset += 5 + length
    return out


def record(body, content_type=HANDSHAKE):
    return bytes([content_type, 0x03, 0x01]) + struct.pack("!H", len(body)) + body


def pad_client_hello(message, padding):
    """The ClientHello handshake message with a padding extension of `padding` bytes appended."""
    body = bytearray(message[4:])
    offset = 2 + 32  # legacy_version, random
    offset += 1 + body[offset]  # legacy_session_id
    offset += 2 + struct.unpack("!H", body[offset:offset + 2])[0]  # cipher_suites
    offset += 1 + body[offset]  # legacy_compression_methods
    extensions_length = struct.unpack("!H", body[offset:offset + 2])[0]
    extension = struct.pack("!HH", 21, padding) + bytes(padding)
    body[offset:offset + 2] = struct.pack("!H", extensions_length + len(extension))
    body += extension
    return bytes([message[0]]) + struct.pack("!I", len(body))[1:] + bytes(body)


def split_client_hello(args):
    context = ssl.create_default_context(cafile=args.ca)
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    context.set_alpn_protocols([QMUX_ALPN])
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname=args.server_name)
    try:
        tls.do_handshake()
    except ssl.SSLWantReadError:
        pass
    message = b"".join(body for kind, body in records(outgoing.read()) if kind == HANDSHAKE)
    if args.pad:
        message = pad_client_hello(message, args.pad)
    size = -(-len(message) // args.records)
    flight = b"".join(record(message[i:i + size]) for i in range(0, len(message), size))
    result = {"answered": False, "handshake": False, "client_hello_bytes": len(message), "alpn": None,
              "error": None}
    start = time.monotonic()
    with socket.create_connection(("127.0.0.1", args.port), timeout=args.timeout) as sock:
        sock.sendall(flight)
        received = b""
        try:
            while True:
                data = sock.recv(65536)
                if not data:
                    result["error"] = "the server closed the connection"
                    break
                received += data
                if not result["answered"] and any(kind == HANDSHAKE and body[:1] == b"\x02"
                                                  for kind, body in records(received)):
                    result["answered"] = True
                    result["answered_ms"] = round((time.monotonic() - start) * 1000, 1)
                    if args.pad:
                        break
                incoming.write(data)
                try:
                    tls.do_handshake()
                except ssl.SSLWantReadError:
                    continue
                finally:
                    pending = outgoing.read()
                    if pending:
                        sock.sendall(pending)
                result["handshake"] = True
                result["handshake_ms"] = round((time.monotonic() - start) * 1000, 1)
                result["alpn"] = tls.selected_alpn_protocol()
                break
        except socket.timeout:
            result["error"] = "no answer within %.1f s" % args.timeout
        except (ssl.SSLError, OSError) as error:
            result["error"] = str(error)
    print(json.dumps(result), flush=True)


def slow_client(args):
    import qmux_peer
    context = ssl.create_default_context(cafile=args.ca)
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    context.set_alpn_protocols([QMUX_ALPN])
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname=args.server_name)
    session = qmux_peer.Session("client", {qmux_peer.TP_IDLE: 30000, qmux_peer.TP_MAX_DATA: 1 << 20,
                                           qmux_peer.TP_BIDI_LOCAL: 1 << 16, qmux_peer.TP_STREAMS_BIDI: 0})
    result = {"served": False, "handshake": False, "error": None}
    start = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", args.port), timeout=args.timeout) as sock:
            try:
                tls.do_handshake()
            except ssl.SSLWantReadError:
                pass
            sock.sendall(outgoing.read())
            time.sleep(args.delay)  # the server's flight waits in our receive buffer meanwhile
            while not result["handshake"]:
                data = sock.recv(65536)
                if not data:
                    raise OSError("the server closed the connection during the handshake")
                incoming.write(data)
                try:
                    tls.do_handshake()
                    result["handshake"] = True
                except ssl.SSLWantReadError:
                    pass
                sock.sendall(outgoing.read())
            tls.write(session.take_output())
            sock.sendall(outgoing.read())
            settled = None
            while True:
                try:
                    session.receive(tls.read(65536))
                except ssl.SSLWantReadError:
                    pass
                if session.peer is not None and settled is None:
                    settled = time.monotonic() + 0.5
                if settled is not None and time.monotonic() >= settled:
                    result["served"] = True
                    break
                sock.settimeout(0.1 if settled is not None else args.timeout)
                try:
                    data = sock.recv(65536)
                except socket.timeout:
                    continue
                if not data:
                    raise OSError("the server closed the connection")
                incoming.write(data)
    except (ssl.SSLError, OSError) as error:
        result["error"] = str(error)
    result["elapsed_ms"] = round((time.monotonic() - start) * 1000, 1)
    print(json.dumps(result), flush=True)


def one_byte_records(args):
    # ClientHello header: type 1, length 131,000; the body is zeros, and the records go on past it.
    header = bytes([1]) + struct.pack("!I", 131000)[1:]
    chunk = b"".join(record(bytes([byte])) for byte in header + bytes(65536 - len(header)))
    filler = record(b"\x00") * (len(chunk) // 6)
    sent = 0
    closed = False
    start = time.monotonic()
    with socket.create_connection(("127.0.0.1", args.port), timeout=args.seconds) as sock:
        sock.settimeout(0.5)
        data = chunk
        while time.monotonic() - start < args.seconds and sent < args.max_bytes:
            try:
                count = sock.send(data)
                sent += count
                data = data[count:] or filler  # whole records only: a partial send continues where it stopped
            except socket.timeout:
                continue  # the server stopped reading: wait for it to close or the time to pass
            except OSError:
                closed = True
                break
        # Then hold the connection open, silent, for the rest of the S seconds (the bytes stay pending on the
        # server) and watch for its close: end of stream or a reset.
        while not closed and time.monotonic() - start < args.seconds:
            sock.settimeout(max(0.01, args.seconds - (time.monotonic() - start)))
            try:
                closed = sock.recv(65536) == b""
            except socket.timeout:
                break
            except OSError:
                closed = True
    print(json.dumps({"bytes_sent": sent, "closed_by_server": closed,
                      "elapsed_ms": round((time.monotonic() - start) * 1000, 1)}), flush=True)


def main():
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM, signal.SIGINT])
    parser = argparse.ArgumentParser(description="pre-handshake TLS records",
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("port", type=int)
    parser.add_argument("--attack", required=True, choices=["split-client-hello", "slow-client", "one-byte-records"])
    parser.add_argument("--ca")
    parser.add_argument("--server-name", default="localhost")
    parser.add_argument("--records", type=int, default=4)
    parser.add_argument("--pad", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=15.0)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--delay", type=float, default=1.0)
    parser.add_argument("--max-bytes", type=int, default=256 * 1024 * 1024)
    args = parser.parse_args()
    if args.attack in ("split-client-hello", "slow-client") and not args.ca:
        parser.error("%s needs --ca" % args.attack)
    if args.attack == "split-client-hello":
        split_client_hello(args)
    elif args.attack == "slow-client":
        slow_client(args)
    else:
        one_byte_records(args)


if __name__ == "__main__":
    main()
