#!/usr/bin/env python3
"""A NAT on loopback that rebinds: it forwards UDP between one client and a server, and after the client's Nth
packet moves the client's mapping to a new source port (or source address, with --new-address) and deletes the
old one, as a carrier NAT does when an idle mapping times out. Packets the server still sends to the old mapping
are lost, as they would be behind the real NAT. --storm-ms T rebinds again every T ms (a flapping NAT).
--spoof-from ADDR replays one client packet, mid-call, from a third address and ahead of the genuine one (a
packet with a valid connection ID from an address that cannot answer): the server must not move the call there.
--cid-length N records the connection IDs the server chose, as they cross the NAT: the destination IDs of the
client's short-header (N bytes) and Handshake packets, and the source IDs of the server's long-header packets
(the first packet of each datagram), listed in the JSON as `client_dcids` and `server_scids` (hex, distinct).

Prints `listening on HOST:PORT` (the address the client connects to); on SIGTERM or SIGINT prints one JSON line
with its counters and exits 0.
"""
import argparse
import json
import select
import signal
import socket
import sys
import time


def send(sock, data, destination):
    """Forwards one datagram; a send that fails (no buffer space, a destination gone) loses it, as a NAT would."""
    try:
        sock.sendto(data, destination)
    except OSError:
        pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("server_port", type=int)
    parser.add_argument("--rebind-after", type=int, default=30, help="client packets before the first rebinding")
    parser.add_argument("--new-address", default=None, help="bind the new mappings to this address")
    parser.add_argument("--storm-ms", type=float, default=0, help="then rebind again every this many ms")
    parser.add_argument("--spoof-from", default=None,
                        help="replay one client packet (the --spoof-at th) from this address, ahead of the original")
    parser.add_argument("--spoof-at", type=int, default=100)
    parser.add_argument("--ipv6", action="store_true", help="::1 instead of 127.0.0.1")
    parser.add_argument("--cid-length", type=int, default=0, help="record the server's connection IDs (this long)")
    args = parser.parse_args()

    family = socket.AF_INET6 if args.ipv6 else socket.AF_INET
    loopback = "::1" if args.ipv6 else "127.0.0.1"
    front = socket.socket(family, socket.SOCK_DGRAM)
    front.bind((loopback, 0))
    upstream = socket.socket(family, socket.SOCK_DGRAM)
    upstream.bind((loopback, 0))
    spoofer = None
    if args.spoof_from:
        spoofer = socket.socket(family, socket.SOCK_DGRAM)
        spoofer.bind((args.spoof_from, 0))
    server = (loopback, args.server_port)
    client = None
    counters = {"client_packets": 0, "server_packets_old_mapping": 0, "server_packets_new_mapping": 0,
                "server_packets_to_spoofer": 0, "rebindings": 0, "rebound": False}
    running = [True]
    for stop in (signal.SIGTERM, signal.SIGINT):  # ChildServer.stop sends SIGINT, a shell's kill SIGTERM
        signal.signal(stop, lambda *_: running.__setitem__(0, False))
    # A process started from a thread that blocks SIGTERM inherits the mask: unblock it, or stop() waits in vain.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM, signal.SIGINT])
    host = f"[{loopback}]" if args.ipv6 else loopback
    print(f"listening on {host}:{front.getsockname()[1]}", flush=True)
    last_rebinding = 0.0
    client_dcids, server_scids = [], []

    def record(ids, cid):
        if cid and cid.hex() not in ids:
            ids.append(cid.hex())

    def record_client(data):
        if not data:
            return
        if data[0] & 0x80 == 0:
            record(client_dcids, data[1:1 + args.cid_length])
        elif data[0] & 0x30 == 0x20 and len(data) > 6:  # Handshake: the server's ID
            record(client_dcids, data[6:6 + data[5]])

    def record_server(data):
        if len(data) > 6 and data[0] & 0x80:
            scid_at = 6 + data[5]
            if len(data) > scid_at:
                record(server_scids, data[scid_at + 1:scid_at + 1 + data[scid_at]])

    def rebind():
        nonlocal upstream, last_rebinding
        upstream.close()  # the old mapping is gone: the server's packets to it are lost
        upstream = socket.socket(family, socket.SOCK_DGRAM)
        upstream.bind((args.new_address or loopback, 0))
        counters["rebindings"] += 1
        counters["rebound"] = True
        last_rebinding = time.monotonic()

    while running[0]:
        sockets = [front, upstream] + ([spoofer] if spoofer else [])
        try:
            readable, _, _ = select.select(sockets, [], [], 0.2)
        except (InterruptedError, ValueError):
            continue
        for sock in readable:
            try:
                data, source = sock.recvfrom(65535)
            except OSError:  # an ICMP error for an earlier packet (e.g. the client already gone): keep going
                continue
            if sock is front:
                client = source
                if args.cid_length:
                    record_client(data)
                counters["client_packets"] += 1
                if not counters["rebound"] and counters["client_packets"] > args.rebind_after:
                    rebind()
                elif counters["rebound"] and args.storm_ms > 0:
                    if (time.monotonic() - last_rebinding) * 1000 >= args.storm_ms:
                        rebind()
                if spoofer is not None and counters["client_packets"] == args.spoof_at:
                    send(spoofer, data, server)  # the attacker's copy arrives first: the genuine one is a duplicate
                send(upstream, data, server)
            elif sock is spoofer:
                counters["server_packets_to_spoofer"] += 1
            elif sock is upstream and client is not None:
                key = "server_packets_new_mapping" if counters["rebound"] else "server_packets_old_mapping"
                counters[key] += 1
                if args.cid_length:
                    record_server(data)
                send(front, data, client)
    if args.cid_length:
        counters["client_dcids"] = client_dcids
        counters["server_scids"] = server_scids
    print(json.dumps(counters), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
