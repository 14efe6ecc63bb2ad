#!/usr/bin/env python3
"""A NAT on loopback that rebinds: it forwards UDP between one client and a server, and after the client's Nth
packet moves the client's mapping to a new source port (or source address, with --new-address) and deletes the
old one, as a carrier NAT does when an idle mapping times out. Packets the server still sends to the old mapping
are lost, as they would be behind the real NAT.

Prints `listening on 127.0.0.1:PORT` (the address the client connects to); on SIGTERM prints one JSON line with
its counters (packets each way, and how many the server sent to the old and to the new mapping) and exits 0.
"""
import argparse
import json
import select
import signal
import socket
import sys


def send(sock, data, destination):
    """Forwards one datagram; a send that fails (no buffer space, a destination gone) loses it, as a NAT would."""
    try:
        sock.sendto(data, destination)
    except OSError:
        pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("server_port", type=int)
    parser.add_argument("--rebind-after", type=int, default=30, help="client packets before the rebinding")
    parser.add_argument("--new-address", default=None, help="bind the new mapping to this address (127.0.0.x)")
    args = parser.parse_args()

    front = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    front.bind(("127.0.0.1", 0))
    upstream = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    upstream.bind(("127.0.0.1", 0))
    server = ("127.0.0.1", args.server_port)
    client = None
    counters = {"client_packets": 0, "server_packets_old_mapping": 0, "server_packets_new_mapping": 0,
                "rebound": False, "old_port": upstream.getsockname()[1], "new_port": None}
    running = [True]
    signal.signal(signal.SIGTERM, lambda *_: running.__setitem__(0, False))
    # A process started from a thread that blocks SIGTERM inherits the mask: unblock it, or stop() waits in vain.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM])
    print(f"listening on 127.0.0.1:{front.getsockname()[1]}", flush=True)

    while running[0]:
        try:
            readable, _, _ = select.select([front, upstream], [], [], 0.2)
        except InterruptedError:
            continue
        for sock in readable:
            try:
                data, source = sock.recvfrom(65535)
            except OSError:  # an ICMP error for an earlier packet (e.g. the client already gone): keep going
                continue
            if sock is front:
                client = source
                counters["client_packets"] += 1
                if not counters["rebound"] and counters["client_packets"] > args.rebind_after:
                    upstream.close()  # the old mapping is gone: the server's packets to it are lost
                    upstream = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                    upstream.bind((args.new_address or "127.0.0.1", 0))
                    counters["rebound"] = True
                    counters["new_port"] = upstream.getsockname()[1]
                send(upstream, data, server)
            elif client is not None:
                key = "server_packets_new_mapping" if counters["rebound"] else "server_packets_old_mapping"
                counters[key] += 1
                send(front, data, client)
    print(json.dumps(counters), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
