#!/usr/bin/env python3
"""A TLS peer that is misconfigured on purpose, for the TCP fallback's bad-input tests. Standard library only.

It speaks TLS and nothing else (no QMux): the tests only need the TLS handshake to fail the right way.

Server (default)
  Listens on TCP, prints "listening on HOST:PORT" once listening, and for every connection runs the TLS handshake
  with certs/server.pem (--cert/--key), then reads until the client closes. One line per connection:
  "handshake ok: VERSION ALPN" or "handshake failed: ERROR". Stops on SIGTERM.

Client (--connect PORT)
  Connects to 127.0.0.1:PORT with the same misconfiguration, verifying the server against --ca for
  --server-name. Once the handshake completed it sends --send-hex (plaintext, e.g. malformed QMux) if given and
  reads until the server closes or --timeout passes. Prints one JSON line: {"ok": true, "version", "alpn",
  "closed_by_server", "received" (hex plaintext)} when the handshake completed, {"ok": false, "error": "..."}
  when it failed. Exit status 0 either way (1 on a usage error).

Misconfigurations (either side)
  --tls12-only   TLS 1.2 at most (maximum_version TLSv1_2)
  --no-alpn      no ALPN extension at all
  --alpn OTHER   offer/accept only OTHER (default: ptt/1-qx01, the QMux ALPN, so --tls12-only tests the version alone)

Examples
  tls_misconfigured_server.py --cert certs/server.pem --key certs/server.key --tls12-only
  tls_misconfigured_server.py --connect 4433 --ca certs/ca.pem --no-alpn
"""

import argparse
import json
import signal
import socket
import ssl
import sys
import threading

QMUX_ALPN = "ptt/1-qx01"


def configure(context, args):
    if args.tls12_only:
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.maximum_version = ssl.TLSVersion.TLSv1_2
    if not args.no_alpn:
        context.set_alpn_protocols([args.alpn])


def serve_one(connection, context):
    with connection:
        connection.settimeout(30)
        try:
            tls = context.wrap_socket(connection, server_side=True)
        except (ssl.SSLError, OSError) as error:
            print("handshake failed: %s" % error, flush=True)
            return
        print("handshake ok: %s %s" % (tls.version(), tls.selected_alpn_protocol()), flush=True)
        try:
            while tls.recv(65536):
                pass
        except (ssl.SSLError, OSError):
            pass
        finally:
            tls.close()


def run_server(args):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    configure(context, args)
    context.load_cert_chain(args.cert, args.key)
    listener = socket.create_server((args.host, args.port))
    host, port = listener.getsockname()[:2]
    print("listening on %s:%d" % (host, port), flush=True)
    while True:
        connection, _ = listener.accept()
        threading.Thread(target=serve_one, args=(connection, context), daemon=True).start()


def run_client(args):
    context = ssl.create_default_context(cafile=args.ca)
    configure(context, args)
    try:
        with socket.create_connection((args.host, args.connect), timeout=args.timeout) as raw:
            with context.wrap_socket(raw, server_hostname=args.server_name) as tls:
                result = {"ok": True, "version": tls.version(), "alpn": tls.selected_alpn_protocol()}
                if args.send_hex:
                    tls.sendall(bytes.fromhex(args.send_hex))
                received = bytearray()
                try:
                    while True:
                        chunk = tls.recv(65536)
                        if not chunk:
                            break
                        received += chunk
                    result["closed_by_server"] = True
                except (ssl.SSLError, OSError) as error:
                    result["closed_by_server"] = not isinstance(error, socket.timeout)
                result["received"] = received.hex()
    except (ssl.SSLError, OSError) as error:
        result = {"ok": False, "error": str(error)}
    print(json.dumps(result), flush=True)


def main():
    # Started from a thread that blocks SIGTERM (a Swift cooperative-pool thread), we inherit that mask.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM, signal.SIGINT])
    parser = argparse.ArgumentParser(description="misconfigured TLS peer",
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--cert")
    parser.add_argument("--key")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--connect", type=int, metavar="PORT", help="be a client of 127.0.0.1:PORT")
    parser.add_argument("--ca")
    parser.add_argument("--server-name", default="localhost")
    parser.add_argument("--timeout", type=float, default=10.0)
    parser.add_argument("--send-hex", metavar="HEX", help="client: plaintext to send once the handshake completed")
    parser.add_argument("--tls12-only", action="store_true")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--no-alpn", action="store_true")
    group.add_argument("--alpn", default=QMUX_ALPN)
    args = parser.parse_args()
    if args.connect is not None:
        if not args.ca:
            parser.error("--connect needs --ca")
        run_client(args)
    else:
        if not args.cert or not args.key:
            parser.error("the server needs --cert and --key")
        try:
            run_server(args)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
