#!/usr/bin/env python3
"""What one TCP (QMux over TLS 1.3) connection can make a relay hold, and whether the relay gives it back once the
connection closes (issue 31, item 11). Standard library only; the QMux state machine is qmux_peer.py's Session.

Attacks (each on every stream the relay allows, with 64,000-byte messages its echo sends back):
  zero-credit        grants the relay no credit at all and sends as the relay's own credit allows (it reads the
                     relay's MAX_DATA frames): the relay's echoes can only queue.
  never-read         grants ample credit (16 MiB), keeps a 4 KiB receive buffer and never reads after the handshake;
                     sends one receive window of the relay's: the echo backs up in the relay.
  credit-never-read  grants ample credit and first reads everything for --warmup seconds (a fast reader: the relay's
                     send buffers grow for it), then never reads again and keeps sending, granting itself the
                     credit the relay would have renewed (a quarter window every --pace seconds) up to --bytes per
                     connection; a relay whose credit it overruns closes the connection.
  idle               only the handshake: what a connection costs the relay anyway (the baseline).

--connections N idle connections come and go first (first-use costs are not an attack's), then as many attack at once
a relay at 127.0.0.1:PORT whose process is --relay-pid, --rounds times (each round on new connections, once the
previous round's are closed and released). Measured in each round: the
relay's VmRSS and the kernel memory of its TCP sockets on PORT (`ss -tm`: receive queue + send queue + forward
allocation), before the attack, at their peak (sampled every 25 ms from the start of the attack to --settle seconds
after its end; the two peaks are added, an upper bound), and after
every connection closed (close(2) with unread bytes: a reset), sampled every 50 ms until the RSS is back within
max(1 MiB, a third of the growth) of where it started and the relay holds no socket on PORT (at most
--release-within seconds). Prints one JSON line: {"attack", "connections", "bytes_sent", "closed_by_relay",
"rss_before_kib", "rss_peak_kib", "kernel_peak_kib", "pinned_per_connection_kib" (RSS growth + kernel memory at the
peak, per connection: the highest of the rounds), "rss_after_close_kib", "kernel_after_close_kib", "released_ms"
(null: not within --release-within; these three of the last round: the first leaves the allocator and the loops'
tables at their high-water mark, which later rounds reuse), "rounds" (each round's figures)}. Exit status 0 (1 when
a connection could not be set up).
"""

import argparse
import json
import os
import re
import socket
import ssl
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qmux_peer as q  # noqa: E402

MESSAGE = q.varint(64000) + bytes(64000)


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS for %d" % pid)


def kernel_kib(port):
    """Receive queue, send queue and forward allocation of the relay's TCP sockets on `port` (listener excluded)."""
    out = subprocess.run(["ss", "-tmnH", "( sport = :%d )" % port], capture_output=True, text=True).stdout
    total, sockets, listening = 0, 0, False
    for line in out.splitlines():
        if not line.startswith((" ", "\t")):
            listening = line.split()[0] == "LISTEN"
            continue
        match = re.search(r"skmem:\(r(\d+),rb\d+,t\d+,tb\d+,f(\d+),w(\d+)", line)
        if match and not listening:
            total += int(match.group(1)) + int(match.group(2)) + int(match.group(3))
            sockets += 1
    return total // 1024, sockets


class Client:
    def __init__(self, args, params, small_buffer):
        raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if small_buffer:  # before connect: the window it advertises follows
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        raw.settimeout(args.timeout)
        raw.connect(("127.0.0.1", args.port))
        context = ssl.create_default_context(cafile=args.ca)
        context.minimum_version = ssl.TLSVersion.TLSv1_3
        context.set_alpn_protocols([q.ALPN])
        self.sock = context.wrap_socket(raw, server_hostname=args.server_name)
        self.session = q.Session("client", params)
        self.closed = False
        self.sent = 0
        self.send(self.session.take_output())
        while self.session.peer is None and not self.closed:
            self.pump(args.timeout)
        if self.session.peer is None:
            raise OSError("the relay ended the handshake")
        self.streams = [sid for sid in (self.session.open_bidi() for _ in range(64)) if sid is not None]

    def send(self, data, timeout=5.0):
        if data and not self.closed:
            try:
                self.sock.settimeout(timeout)
                self.sock.sendall(data)
            except (OSError, ssl.SSLError):
                self.closed = True

    def pump(self, timeout):
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(262144)
        except (socket.timeout, ssl.SSLWantReadError):
            return
        except (OSError, ssl.SSLError):
            self.closed = True
            return
        if not data:
            self.closed = True
            return
        self.session.receive(data)
        self.session.events = []
        if self.session.closed:
            self.closed = True

    def queue(self, total):
        """`total` bytes of messages over the streams, round robin."""
        index = 0
        while total > 0:
            self.session.write(self.streams[index % len(self.streams)], MESSAGE)
            total -= len(MESSAGE)
            index += 1

    def flush(self):
        before = self.session.conn_sent
        self.send(self.session.take_output())
        self.sent += self.session.conn_sent - before


def attack(args, clients):
    deadline = time.monotonic() + args.attack_seconds
    if args.attack == "idle":
        return
    if args.attack == "zero-credit":
        for client in clients:
            client.queue(4 * len(client.streams) * len(MESSAGE))
        while time.monotonic() < deadline:
            busy = False
            for client in clients:
                if client.closed:
                    continue
                client.flush()
                client.pump(0.01)
                busy = busy or any(client.session.streams[sid].send_buf for sid in client.streams)
            if not busy:
                break
        return
    if args.attack == "credit-never-read":  # a fast reader first
        for client in clients:
            client.queue(args.bytes)
        warm = time.monotonic() + args.warmup
        while time.monotonic() < warm:
            for client in clients:
                if client.closed:
                    continue
                client.flush()
                client.pump(0.005)
                for sid in client.streams:  # reads the echo as it comes: credit goes back at once
                    stream = client.session.streams[sid]
                    client.session.consume(sid, stream.recv_offset - stream.consumed)
        for client in clients:
            session = client.session
            granted = session.conn_send_max
            while not client.closed and time.monotonic() < deadline and session.conn_sent < args.bytes:
                if session.conn_sent >= granted:
                    break
                client.flush()
        # From here no read: the credit the relay renews is granted by the attacker itself, a quarter window a time.
        quarter = 16 * 1024
        while time.monotonic() < deadline:
            time.sleep(args.pace)
            active = False
            for client in clients:
                session = client.session
                if client.closed or session.conn_sent >= args.bytes:
                    continue
                active = True
                session.conn_send_max = session.conn_sent + quarter
                for sid in client.streams:
                    session.streams[sid].send_max = max(session.streams[sid].send_max, session.streams[sid].sent + quarter)
                client.flush()
            if not active:
                break
        return
    # never-read: one window of the relay's, never a read after the handshake.
    window = min(client.session.conn_send_max for client in clients)
    for client in clients:
        client.queue(window)
        client.flush()


class Sampler(threading.Thread):
    """The relay's peak RSS and kernel socket memory, every 25 ms until stopped."""

    def __init__(self, pid, port):
        super().__init__(daemon=True)
        self.pid, self.port = pid, port
        self.rss_peak = self.kernel_peak = 0
        self.running = True

    def run(self):
        while self.running:
            self.rss_peak = max(self.rss_peak, rss_kib(self.pid))
            self.kernel_peak = max(self.kernel_peak, kernel_kib(self.port)[0])
            time.sleep(0.025)


def run_round(args, params, credit, release_within):
    """One attack by --connections clients: the peaks, then the close and the wait (at most `release_within`
    seconds) for the release."""
    rss_before = rss_kib(args.relay_pid)
    clients = [Client(args, params, small_buffer=credit > 0) for _ in range(args.connections)]
    sampler = Sampler(args.relay_pid, args.port)
    sampler.start()
    attack(args, clients)
    end = time.monotonic() + args.settle
    while time.monotonic() < end:
        if args.attack == "zero-credit":
            for client in clients:
                if not client.closed:
                    client.pump(0.01)  # keeps reading the relay's frames, granting nothing
        time.sleep(0.05)
    sampler.running = False
    sampler.join()
    rss_peak, kernel_peak = sampler.rss_peak, sampler.kernel_peak
    closed_by_relay = sum(1 for client in clients if client.closed)
    bytes_sent = sum(client.sent for client in clients)

    for client in clients:
        try:
            client.sock.close()
        except OSError:
            pass
    start = time.monotonic()
    released_ms = None
    growth = max(0, rss_peak - rss_before)
    while time.monotonic() - start < release_within:
        rss_after = rss_kib(args.relay_pid)
        kernel_after, sockets = kernel_kib(args.port)
        if rss_after - rss_before <= max(1024, growth // 3) and sockets == 0:
            released_ms = round((time.monotonic() - start) * 1000)
            break
        time.sleep(0.05)
    return {
        "attack": args.attack, "connections": len(clients), "bytes_sent": bytes_sent,
        "closed_by_relay": closed_by_relay, "rss_before_kib": rss_before, "rss_peak_kib": rss_peak,
        "kernel_peak_kib": kernel_peak,
        "pinned_per_connection_kib": round((growth + kernel_peak) / max(1, len(clients)), 1),
        "rss_after_close_kib": rss_after, "kernel_after_close_kib": kernel_after, "released_ms": released_ms,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("port", type=int)
    parser.add_argument("--ca", required=True)
    parser.add_argument("--server-name", default="localhost")
    parser.add_argument("--attack", required=True, choices=["zero-credit", "never-read", "credit-never-read", "idle"])
    parser.add_argument("--relay-pid", type=int, required=True)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--attack-seconds", type=float, default=6.0)
    parser.add_argument("--bytes", type=int, default=2 << 20)
    parser.add_argument("--pace", type=float, default=0.05)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--settle", type=float, default=2.0)
    parser.add_argument("--release-within", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=10.0)
    args = parser.parse_args()

    ample = 16 << 20
    credit = 0 if args.attack == "zero-credit" else ample
    params = {q.TP_IDLE: 60000, q.TP_MAX_DATA: credit, q.TP_BIDI_LOCAL: credit, q.TP_BIDI_REMOTE: 0,
              q.TP_UNI: 0, q.TP_STREAMS_BIDI: 0, q.TP_STREAMS_UNI: 0}
    try:
        # First-use costs (type metadata, TLS and allocator caches, threads) are not the attack's: as many idle
        # connections come and go first, and the relay's freed memory goes back (about a second after a close).
        # Costs of the attack's own first use (its data path's tables at their high-water mark) stay in: the
        # figure is an upper bound.
        warm = [Client(args, params, small_buffer=False) for _ in range(args.connections)]
        for client in warm:
            client.sock.close()
        time.sleep(2.0)
        rounds = []
        for index in range(args.rounds):
            if index > 0:
                time.sleep(1.5)  # the previous round's freed memory goes back about a second after its close
            last = index == args.rounds - 1
            rounds.append(run_round(args, params, credit, release_within=args.release_within if last else 3.0))
        result = dict(rounds[-1])
        # The highest peak of any round (the first one's includes the data path's own first use: an upper bound);
        # the release is the last round's (the first leaves the allocator and the loops' tables at their high-water
        # mark, which later attacks reuse).
        result["pinned_per_connection_kib"] = max(r["pinned_per_connection_kib"] for r in rounds)
        result["rounds"] = [{key: r[key] for key in ("pinned_per_connection_kib", "released_ms", "rss_before_kib",
                                                     "rss_after_close_kib")} for r in rounds]
    except (OSError, ssl.SSLError) as error:
        print(json.dumps({"attack": args.attack, "error": str(error)}), flush=True)
        sys.exit(1)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
