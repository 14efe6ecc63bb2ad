#!/usr/bin/env python3
"""A recording forwarder that replays a client's first flight to other relays: an attacker on the path who
captured a 0-RTT ClientHello (and the early data after it) and sends it again, byte for byte, elsewhere.

It forwards between clients and one relay on 127.0.0.1:TARGET, over UDP (QUIC) or TCP (QMux over TLS). For each new
client (a new UDP source address, a new TCP connection) it records what the client sent before the relay's first
byte came back: the first flight, ClientHello plus early data. On SIGUSR1 it replays the newest recorded flight to
each port listed in the file --ports-file (comma-separated, read at each signal) from a fresh socket, as another
host would, waits up to a second for answers, and prints one JSON line:
{"replayed_to": [PORT, ...], "flight_bytes": N, "answered": [BYTES, ...]}.

Its first line is `listening on 127.0.0.1:PORT`; SIGTERM ends it (exit status 0).
"""
import argparse
import json
import select
import signal
import socket
import time


def replay(transport, flight, port):
    """Sends the flight to 127.0.0.1:port from a fresh socket; the number of bytes answered within a second."""
    answered = 0
    if transport == "udp":
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind(("127.0.0.1", 0))
        for datagram in flight:
            sock.sendto(datagram, ("127.0.0.1", port))
    else:
        sock = socket.create_connection(("127.0.0.1", port), timeout=2)
        sock.sendall(b"".join(flight))
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        readable, _, _ = select.select([sock], [], [], max(0.0, deadline - time.monotonic()))
        if not readable:
            break
        try:
            data = sock.recv(65535)
        except OSError:
            break
        if not data:
            break
        answered += len(data)
    sock.close()
    return answered


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target_port", type=int)
    parser.add_argument("--transport", choices=["udp", "tcp"], default="udp")
    parser.add_argument("--ports-file", required=True, help="holds the comma-separated ports replayed to on SIGUSR1")
    args = parser.parse_args()
    target = ("127.0.0.1", args.target_port)
    kind = socket.SOCK_DGRAM if args.transport == "udp" else socket.SOCK_STREAM
    front = socket.socket(socket.AF_INET, kind)
    front.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    front.bind(("127.0.0.1", 0))
    if args.transport == "tcp":
        front.listen(16)
    state = {"running": True, "replay": False, "flight": [], "recording": None}
    peers = {}  # socket -> its other end (tcp), or upstream socket -> client address (udp)
    upstreams = {}  # udp: client address -> socket towards the relay

    signal.signal(signal.SIGTERM, lambda *_: state.__setitem__("running", False))
    signal.signal(signal.SIGUSR1, lambda *_: state.__setitem__("replay", True))
    # A process started from a thread that blocks signals inherits the mask: unblock them, or nothing arrives.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM, signal.SIGUSR1])
    print(f"listening on 127.0.0.1:{front.getsockname()[1]}", flush=True)

    def client_sent(key, data):
        if state["recording"] == key:
            state["flight"].append(data)

    def upstream_of(source):
        """The socket towards the relay for a UDP client; a new client starts a new recording."""
        if source not in upstreams:
            upstreams[source] = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            upstreams[source].bind(("127.0.0.1", 0))
            peers[upstreams[source]] = source
            state["recording"], state["flight"] = source, []
        return upstreams[source]

    while state["running"]:
        if state["replay"]:
            state["replay"] = False
            with open(args.ports_file) as ports_file:
                ports = [int(p) for p in ports_file.read().strip().split(",") if p]
            answered = [replay(args.transport, state["flight"], port) for port in ports]
            size = sum(len(chunk) for chunk in state["flight"])
            print(json.dumps({"replayed_to": ports, "flight_bytes": size, "answered": answered}), flush=True)
        try:
            readable, _, _ = select.select([front] + list(peers), [], [], 0.05)
        except InterruptedError:
            continue
        for sock in readable:
            if args.transport == "tcp" and sock is front:
                client, _ = front.accept()
                upstream = socket.create_connection(target)
                peers[client] = upstream
                peers[upstream] = client
                state["recording"], state["flight"] = client, []
                continue
            try:
                data, source = sock.recvfrom(65535)
            except OSError:
                data, source = b"", None
            if args.transport == "udp":
                if sock is front:
                    upstream = upstream_of(source)
                    client_sent(source, data)
                    upstream.sendto(data, target)
                else:
                    if state["recording"] == peers[sock]:
                        state["recording"] = None  # the relay answered: the first flight is complete
                    front.sendto(data, peers[sock])
                continue
            other = peers.get(sock)
            if not data or other is None:
                for end in (sock, other):
                    if end is not None:
                        peers.pop(end, None)
                        end.close()
                continue
            if sock in peers and peers[sock] is not None and state["recording"] in (sock, other):
                if state["recording"] == sock:
                    client_sent(sock, data)
                else:
                    state["recording"] = None
            other.sendall(data)


if __name__ == "__main__":
    main()
