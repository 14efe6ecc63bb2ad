#!/usr/bin/env python3
"""A UDP path on loopback that can be cut and restored: it forwards datagrams between clients and one server,
and on SIGUSR1 drops everything in both directions (a phone that lost its network: no ICMP, just silence) until
SIGUSR2 restores it. Mappings survive the cut, as a phone's own NAT keeps them while it is offline briefly.

With --mirror-to PORT it also plays an attacker who learned the client's connection IDs (issue 31, item 8): every
short-header packet a client sends is copied, from a socket of its own, to another server on 127.0.0.1:PORT (a relay
of the same fleet), and whatever that server answers is forwarded to the client as if its own server had sent it
(the attacker spoofs the client's address). A relay that answers another relay's connection IDs with the stateless
reset the client holds ends the client's call.

Its first line is `listening on 127.0.0.1:PORT`, where clients connect; SIGTERM or SIGINT ends it after one JSON line of
counters (exit status 0): `forwarded`, `dropped`, `cuts`, `restores`, and with --mirror-to `mirrored`,
`mirror_replies` and `mirror_reply_bytes`.
"""
import argparse
import json
import select
import signal
import socket

from rebinding_nat import send  # forwards one datagram; a failed send loses it, as a real path would


def socket_for(client, sockets, owners):
    """The socket `client`'s datagrams leave from towards one server (made on first use, on 127.0.0.1)."""
    sock = sockets.get(client)
    if sock is None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind(("127.0.0.1", 0))
        sockets[client] = sock
        owners[sock] = client
    return sock


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("server_port", type=int)
    parser.add_argument("--mirror-to", type=int, default=None)
    args = parser.parse_args()

    front = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    front.bind(("127.0.0.1", 0))
    server = ("127.0.0.1", args.server_port)
    upstreams = {}  # client address -> socket towards the server
    clients = {}  # upstream socket -> client address
    state = {"running": True, "cut": False}
    counters = {"forwarded": 0, "dropped": 0, "cuts": 0, "restores": 0}
    mirrors = {}  # client address -> socket towards the --mirror-to server
    mirrored_clients = {}  # mirror socket -> client address
    if args.mirror_to is not None:
        counters.update(mirrored=0, mirror_replies=0, mirror_reply_bytes=0)

    def cut(*_):
        state["cut"] = True
        counters["cuts"] += 1

    def restore(*_):
        state["cut"] = False
        counters["restores"] += 1

    signal.signal(signal.SIGTERM, lambda *_: state.__setitem__("running", False))
    signal.signal(signal.SIGINT, lambda *_: state.__setitem__("running", False))
    signal.signal(signal.SIGUSR1, cut)
    signal.signal(signal.SIGUSR2, restore)
    # A process started from a thread that blocks signals inherits the mask: unblock them, or nothing arrives.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2])
    print(f"listening on 127.0.0.1:{front.getsockname()[1]}", flush=True)

    while state["running"]:
        try:
            readable, _, _ = select.select([front] + list(clients) + list(mirrored_clients), [], [], 0.05)
        except InterruptedError:
            continue
        for sock in readable:
            try:
                data, source = sock.recvfrom(65535)
            except OSError:
                continue
            if state["cut"]:
                counters["dropped"] += 1
                continue
            if sock in mirrored_clients:  # the other relay answered a copy: to the client, as if from its server
                counters["mirror_replies"] += 1
                counters["mirror_reply_bytes"] += len(data)
                send(front, data, mirrored_clients[sock])
                continue
            counters["forwarded"] += 1
            if sock is front:
                if args.mirror_to is not None and data and data[0] & 0x80 == 0:
                    send(socket_for(source, mirrors, mirrored_clients), data, ("127.0.0.1", args.mirror_to))
                    counters["mirrored"] += 1
                send(socket_for(source, upstreams, clients), data, server)
            else:
                send(front, data, clients[sock])
    print(json.dumps(counters), flush=True)


if __name__ == "__main__":
    main()
