#!/usr/bin/env python3
"""A stateful fuzzer inside encrypted QUIC packets, against a relay in another process.

Each sequence is one connection: an ordinary handshake with aioquic, then the fuzzer takes the connection's
1-RTT keys and drives it by hand, step by step. A step sends one real, encrypted 1-RTT packet of chosen frames
(STREAM, CRYPTO, ACK, DATAGRAM, NEW/RETIRE_CONNECTION_ID, PATH_CHALLENGE/RESPONSE, MAX_*, RESET_STREAM,
STOP_SENDING, *_BLOCKED, CONNECTION_CLOSE, PING, ...) from a chosen source address (one of --ports UDP sockets,
so the address changes between packets when the fuzzer wants), to a chosen connection ID of the relay's. Between
steps it reads what the relay sent (decrypted with the session's keys): it acknowledges the relay's packets or
withholds the ACKs, and answers the relay's PATH_CHALLENGEs or not, as the sequence's policy says. With --early a
sequence starts by resuming a ticket and puts its first steps in 0-RTT packets.

After every sequence it checks that the relay process (--relay-pid) is still alive; when it is not, it prints the
sequence's seed and steps (and the one before, whose timers may have done it) and exits 2. Sequences are reproducible
from --seed (the relay's answers may vary). --workers W runs W processes side by side, worker w taking sequences w,
w + W, ... from its own loopback source address (127.0.0.(2 + w)); an abort seen by one stops all, and the report
lists what each worker was running (with several connections in flight, the culprit is one of those).

    quic_state_fuzzer.py HOST PORT --ca PEM --relay-pid PID [--sequences N] [--seconds S] [--seed S]
                         [--steps K] [--ports P] [--mode mixed|valid|chaos] [--forward-only] [--script NAME] [--early]
                         [--workers W] [--progress S] [--server-name localhost] [--alpn ptt/1]

--mode valid sends only frames a well-behaved client could send (the relay keeps the connection, so sequences reach
deep path and connection-ID states); chaos sends anything, including what the relay must refuse; mixed (the
default) picks valid for 70 % of the sequences.

--script runs one fixed sequence instead of random ones (the attacks that aborted ngtcp2 0.12.1 relays):
  migrate-ncid        PING from a second port with the relay's connection ID, PING from a third port with another
                      of its IDs, then NEW_CONNECTION_ID(seq 4, retire_prior_to 1)
  migrate-revalidate  the two path changes of migrate-ncid, then answer every PATH_CHALLENGE and never
                      acknowledge a 1-RTT packet for 3 s (the relay's re-validation of the old path ends)
  retire-table        four rounds of NEW_CONNECTION_ID with fresh sequence numbers and a rising retire_prior_to,
                      no ACK at all (16 unacknowledged retirements), then the two path changes
  key-update          CRYPTO(offset 0) holding a TLS KeyUpdate (18 00 00 01 00) in a 1-RTT packet
  key-update-requested  the same with update_requested (18 00 00 01 01)
  probe-flood         PATH_CHALLENGE from 24 fresh ports, no ACK (each new path binds one of the relay's IDs)
  migrate-benign      not an attack: a NAT rebinding (PING from a second port, PATH_CHALLENGE answered, ACKs
                      sent), then an echo on a stream must still come back

Prints one JSON line: sequences, steps, packets sent and received, how the relay ended the connections
(closes by error code), `no_handshake` (connections the relay closed before the handshake completed: with --early
often on purpose, a frame 0-RTT forbids), and `aborted` with the failing sequence when the relay died. Exit 0: the relay survived;
2: it died; 1: the fuzzer could not run (no handshake at all, bad arguments), with one line on stderr.
"""
import argparse
import json
import multiprocessing
import os
import random
import select
import socket
import sys
import time

from aioquic import tls
from quic_peer_support import add_relay_arguments, client_configuration, varint
from aioquic.quic.connection import QuicConnection
from aioquic.quic.events import HandshakeCompleted

CID_LENGTH = 8  # aioquic's connection IDs, so the relay's packets to us carry 8-byte destination IDs

# Frame types (RFC 9000 section 19, RFC 9221).
PADDING, PING, ACK, RESET_STREAM, STOP_SENDING, CRYPTO, NEW_TOKEN = 0x00, 0x01, 0x02, 0x04, 0x05, 0x06, 0x07
MAX_DATA, MAX_STREAM_DATA, MAX_STREAMS_BIDI, MAX_STREAMS_UNI = 0x10, 0x11, 0x12, 0x13
DATA_BLOCKED, STREAM_DATA_BLOCKED, STREAMS_BLOCKED_BIDI = 0x14, 0x15, 0x16
NEW_CONNECTION_ID, RETIRE_CONNECTION_ID, PATH_CHALLENGE, PATH_RESPONSE = 0x18, 0x19, 0x1A, 0x1B
CONNECTION_CLOSE, CONNECTION_CLOSE_APP, HANDSHAKE_DONE, DATAGRAM, DATAGRAM_LEN = 0x1C, 0x1D, 0x1E, 0x30, 0x31



class Reader:
    """A cursor over a decrypted payload; raises IndexError past the end."""

    def __init__(self, data):
        self.data, self.at = data, 0

    def byte(self):
        value = self.data[self.at]
        self.at += 1
        return value

    def varint(self):
        first = self.data[self.at]
        length = 1 << (first >> 6)
        if self.at + length > len(self.data):
            raise IndexError("varint")
        value = first & 0x3F
        for i in range(1, length):
            value = (value << 8) | self.data[self.at + i]
        self.at += length
        return value

    def bytes(self, count):
        if self.at + count > len(self.data):
            raise IndexError("bytes")
        value = self.data[self.at:self.at + count]
        self.at += count
        return value


def parse_frames(payload):
    """The relay's frames we act on: (kind, value) pairs. Stops quietly at anything it cannot read."""
    found, reader = [], Reader(payload)
    try:
        while reader.at < len(payload):
            kind = reader.varint()
            if kind == PADDING:  # a run of padding (the relay pads to 1,200 bytes): skip it whole
                reader.at = len(payload) - len(payload[reader.at:].lstrip(b"\0"))
                continue
            if kind in (PING, HANDSHAKE_DONE):
                continue
            if kind in (ACK, ACK + 1):
                reader.varint(), reader.varint()
                ranges = reader.varint()
                reader.varint()
                for _ in range(2 * ranges):
                    reader.varint()
                if kind == ACK + 1:
                    for _ in range(3):
                        reader.varint()
            elif kind == RESET_STREAM:
                for _ in range(3):
                    reader.varint()
            elif kind in (STOP_SENDING, MAX_STREAM_DATA, STREAM_DATA_BLOCKED):
                reader.varint(), reader.varint()
            elif kind in (MAX_DATA, MAX_STREAMS_BIDI, MAX_STREAMS_UNI, DATA_BLOCKED, STREAMS_BLOCKED_BIDI,
                          STREAMS_BLOCKED_BIDI + 1, RETIRE_CONNECTION_ID):
                value = reader.varint()
                if kind == RETIRE_CONNECTION_ID:
                    found.append(("retire", value))
            elif kind == CRYPTO:
                reader.varint()
                reader.bytes(reader.varint())
            elif kind == NEW_TOKEN:
                reader.bytes(reader.varint())
            elif 0x08 <= kind <= 0x0F:
                stream_id = reader.varint()
                offset = reader.varint() if kind & 0x04 else 0
                data = reader.bytes(reader.varint()) if kind & 0x02 else reader.bytes(len(payload) - reader.at)
                found.append(("stream", (stream_id, offset, data)))
            elif kind == NEW_CONNECTION_ID:
                sequence, _ = reader.varint(), reader.varint()
                cid = reader.bytes(reader.byte())
                reader.bytes(16)
                found.append(("cid", (sequence, cid)))
            elif kind == PATH_CHALLENGE:
                found.append(("challenge", reader.bytes(8)))
            elif kind == PATH_RESPONSE:
                reader.bytes(8)
            elif kind in (CONNECTION_CLOSE, CONNECTION_CLOSE_APP):
                code = reader.varint()
                if kind == CONNECTION_CLOSE:
                    reader.varint()
                reason = reader.bytes(reader.varint())
                found.append(("close", (code, reason.decode("utf-8", "replace"))))
            elif kind in (DATAGRAM, DATAGRAM_LEN):
                if kind == DATAGRAM_LEN:
                    reader.bytes(reader.varint())
                else:
                    reader.at = len(payload)
            else:
                break
    except IndexError:
        pass
    return found


def ack_frame(received):
    """An ACK of every packet number in `received` (a non-empty set), ack delay 0."""
    numbers = sorted(received, reverse=True)
    ranges, start, end = [], numbers[0], numbers[0]
    for number in numbers[1:]:
        if number == end - 1:
            end = number
            continue
        ranges.append((start, end))
        start = end = number
    ranges.append((start, end))
    ranges = ranges[:32]
    body = varint(ranges[0][0]) + varint(0) + varint(len(ranges) - 1) + varint(ranges[0][0] - ranges[0][1])
    previous_low = ranges[0][1]
    for high, low in ranges[1:]:
        body += varint(previous_low - high - 2) + varint(high - low)
        previous_low = low
    return bytes([ACK]) + body


def ncid_frame(sequence, retire_prior_to, rng):
    cid = bytes(rng.getrandbits(8) for _ in range(CID_LENGTH))
    token = bytes(rng.getrandbits(8) for _ in range(16))
    return bytes([NEW_CONNECTION_ID]) + varint(sequence) + varint(retire_prior_to) + bytes([CID_LENGTH]) + cid + token


def stream_frame(stream_id, offset, data, fin=False):
    return bytes([0x08 | 0x04 | 0x02 | (0x01 if fin else 0)]) + varint(stream_id) + varint(offset) + \
        varint(len(data)) + data


class Session:
    """One connection, handshaken by aioquic and then driven packet by packet with its 1-RTT keys."""

    def __init__(self, quic, sockets, server, log):
        self.quic, self.sockets, self.server, self.log = quic, sockets, server, log
        self.crypto = quic._cryptos[tls.Epoch.ONE_RTT]
        self.early_crypto = quic._cryptos.get(tls.Epoch.ZERO_RTT)
        self.pn = quic._packet_number
        space = quic._spaces[tls.Epoch.ONE_RTT]
        self.received = {number for numbers in space.ack_queue for number in numbers}  # not yet acknowledged
        self.largest = space.largest_received_packet
        self.server_cids = {0: quic._peer_cid.cid} if quic._peer_cid.sequence_number == 0 else {}
        self.server_cids[quic._peer_cid.sequence_number or 0] = quic._peer_cid.cid
        for entry in quic._peer_cid_available:
            self.server_cids[entry.sequence_number] = entry.cid
        self.current_cid = quic._peer_cid.cid
        self.challenges = []  # (socket index, data) the relay sent and we have not answered
        self.closed = None
        self.packets_sent = self.packets_received = 0
        self.echoed = bytearray()

    def send(self, frames, port=0, cid=None, early=False):
        """One 1-RTT (or 0-RTT) packet holding `frames`, from socket `port`, to the relay's `cid`."""
        crypto = self.early_crypto if early else self.crypto
        if crypto is None or not crypto.send.is_valid():
            return
        payload = frames + bytes(max(0, 4 - len(frames)))  # header protection samples 4 bytes past the number
        number = self.pn
        self.pn += 1
        dcid = cid if cid is not None else self.current_cid
        if early:
            header = bytes([0xC0 | 0x10 | 0x03]) + (1).to_bytes(4, "big") + bytes([len(dcid)]) + dcid
            header += bytes([len(self.quic.host_cid)]) + self.quic.host_cid
            header += (0x4000 | (4 + len(payload) + 16)).to_bytes(2, "big") + number.to_bytes(4, "big")
        else:
            header = bytes([0x40 | (crypto.key_phase << 2) | 0x03]) + dcid + number.to_bytes(4, "big")
        try:
            self.sockets[port].sendto(crypto.encrypt_packet(header, payload, number), self.server)
            self.packets_sent += 1
        except OSError:
            pass

    def pump(self, seconds):
        """Reads what the relay sends for `seconds`, decrypting 1-RTT packets and noting what we act on."""
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            readable, _, _ = select.select(self.sockets, [], [], max(0.0, left))
            if not readable:
                return
            for sock in readable:
                try:
                    data, _ = sock.recvfrom(65536)
                except OSError:
                    continue
                self.packets_received += 1
                if not data or data[0] & 0x80 or len(data) < 1 + CID_LENGTH + 20:
                    continue
                try:
                    _, payload, number = self.crypto.decrypt_packet(data, 1 + CID_LENGTH, (self.largest or 0) + 1)
                except Exception:  # a stateless reset, a packet under other keys: nothing to act on
                    continue
                self.largest = number if self.largest is None else max(self.largest, number)
                self.received.add(number)
                for kind, value in parse_frames(payload):
                    if kind == "challenge":
                        self.challenges.append((self.sockets.index(sock), value))
                    elif kind == "cid":
                        self.server_cids[value[0]] = value[1]
                    elif kind == "close":
                        self.closed = value
                    elif kind == "stream":
                        self.echoed.extend(value[2])

    def acknowledge(self, port=0):
        if self.received:
            self.send(ack_frame(self.received), port=port)
            self.received.clear()

    def answer_challenges(self):
        for port, data in self.challenges:
            self.send(bytes([PATH_RESPONSE]) + data, port=port)
        self.challenges.clear()

    def other_cid(self):
        """A connection ID of the relay's other than the one in use (None when it issued none)."""
        others = [cid for _, cid in sorted(self.server_cids.items()) if cid != self.current_cid]
        return others[0] if others else None


def configuration(args, ticket=None):
    return client_configuration(args, ticket, connection_id_length=CID_LENGTH)


def handshake(args, sockets, server, ticket=None, timeout=5.0, early_frames=None):
    """An ordinary aioquic handshake on sockets[0]; returns the Session once the relay issued a spare connection
    ID (or the handshake is confirmed and no more arrive), else None. With early_frames and a ticket, those
    frames go out in a 0-RTT packet right after the ClientHello."""
    tickets = []
    quic = QuicConnection(configuration=configuration(args, ticket), session_ticket_handler=tickets.append)
    quic.connect(server, now=time.monotonic())
    sock = sockets[0]
    deadline = time.monotonic() + timeout
    completed, confirmed_at, session = False, None, None
    if early_frames is not None and ticket is not None:
        session_ready = quic._cryptos.get(tls.Epoch.ZERO_RTT)
        for data, addr in quic.datagrams_to_send(now=time.monotonic()):
            sock.sendto(data, addr)
        if session_ready is not None and session_ready.send.is_valid():
            # The early frames write on streams behind aioquic's back: let it know them, so that the relay's answers
            # there (echoes, RESET_STREAM, STOP_SENDING) are not protocol errors to aioquic, which still runs the
            # handshake. (A chaos frame on another stream can still make aioquic itself close: `no_handshake`.)
            for stream_id in (0, 4, 8):  # the client-initiated streams the early frames name most
                quic._get_or_create_stream_for_send(stream_id)
            early = Session(quic, sockets, server, None)
            early.early_crypto = session_ready
            for frames in early_frames:
                early.send(frames, early=True)
            quic._packet_number = early.pn
    while time.monotonic() < deadline:
        now = time.monotonic()
        for data, addr in quic.datagrams_to_send(now=now):
            sock.sendto(data, addr)
        timer = quic.get_timer()
        wait = min(deadline, timer if timer is not None else deadline) - time.monotonic()
        readable, _, _ = select.select([sock], [], [], max(0.0, min(wait, 0.05)))
        now = time.monotonic()
        if readable:
            data, addr = sock.recvfrom(65536)
            quic.receive_datagram(data, addr, now=now)
        elif timer is not None and timer <= now:
            quic.handle_timer(now=now)
        while (event := quic.next_event()) is not None:
            if isinstance(event, HandshakeCompleted):
                completed = True
        if quic._state.name in ("CLOSING", "DRAINING", "TERMINATED"):
            return None, tickets
        if completed and quic._handshake_confirmed:
            confirmed_at = confirmed_at or time.monotonic()
            if quic._peer_cid_available or time.monotonic() - confirmed_at > 0.2:
                for data, addr in quic.datagrams_to_send(now=time.monotonic()):
                    sock.sendto(data, addr)
                session = Session(quic, sockets, server, None)
                if ticket is None and not tickets:
                    session.pump(0.02)
                return session, tickets
    return session, tickets


# ---- the fixed sequences (each was one of 0.12.1's aborts) ----

def two_path_changes(session):
    """PING from port 1 with the current connection ID, then PING from port 2 with another of the relay's IDs."""
    session.send(bytes([PING]), port=1)
    session.pump(0.05)
    other = session.other_cid()
    if other is None:
        raise RuntimeError("the relay issued no spare connection ID")
    session.send(bytes([PING]), port=2, cid=other)
    session.pump(0.05)


def run_script(name, session, rng):
    if name == "migrate-ncid":
        two_path_changes(session)
        session.send(ncid_frame(4, 1, rng), port=2, cid=session.other_cid())
        session.pump(0.3)
    elif name == "migrate-revalidate":
        two_path_changes(session)
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline and session.closed is None:
            session.answer_challenges()
            session.pump(0.05)
    elif name == "retire-table":
        sequence = 4
        for _ in range(4):
            frames = b"".join(ncid_frame(sequence + i, sequence, rng) for i in range(4))
            session.send(frames)
            sequence += 4
            session.pump(0.1)
            session.received.clear()  # never acknowledge: the relay's RETIRE_CONNECTION_IDs stay unacknowledged
        two_path_changes(session)
        session.pump(0.3)
    elif name in ("key-update", "key-update-requested"):
        message = bytes([0x18, 0x00, 0x00, 0x01, 0x01 if name.endswith("requested") else 0x00])
        session.send(bytes([CRYPTO]) + varint(0) + varint(len(message)) + message)
        session.pump(0.3)
    elif name == "probe-flood":
        extra = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(24)]
        try:
            for sock in extra:
                sock.bind(("127.0.0.1", 0))
                session.sockets.append(sock)
                session.send(bytes([PATH_CHALLENGE]) + os.urandom(8), port=len(session.sockets) - 1)
                session.pump(0.01)
                session.received.clear()
            session.pump(0.3)
        finally:
            for sock in extra:
                session.sockets.remove(sock)
                sock.close()
    elif name == "migrate-benign":
        session.send(bytes([PING]), port=1)
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline and session.closed is None:
            session.pump(0.03)
            session.answer_challenges()
            session.acknowledge(port=1)
        message = b"after rebinding"
        session.send(stream_frame(0, 0, varint(len(message)) + message), port=1)
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline and session.closed is None and message not in bytes(session.echoed):
            session.pump(0.03)
            session.acknowledge(port=1)
        if message not in bytes(session.echoed):
            raise RuntimeError("no echo after a NAT rebinding")
    else:
        raise ValueError(f"unknown script {name}")


# ---- random sequences ----

class Policy:
    """How one random sequence treats the relay: ACKs and PATH_CHALLENGE answers, and where packets come from."""

    def __init__(self, rng, ports):
        self.ack = rng.choice(["never", "always", "sometimes"])
        self.answer = rng.choice(["never", "always", "sometimes"])
        self.move = rng.choice([0.0, 0.2, 0.5])  # chance that a step sends from another port
        self.ports = ports


VALID_KINDS = (["ping", "stream", "ack", "datagram", "ncid", "retire", "challenge", "response", "max", "padding"],
               [10, 10, 8, 6, 14, 4, 8, 4, 3, 2])
CHAOS_KINDS = (["ping", "stream", "crypto", "ack", "datagram", "ncid", "retire", "challenge", "response", "max",
                "reset", "stop", "blocked", "close", "padding", "bogus"],
               [10, 10, 3, 6, 5, 14, 5, 8, 4, 5, 3, 3, 2, 1, 2, 1])


def random_frame(rng, session, state, valid=False):
    """One frame. `valid`: only what a well-behaved client could send (the relay keeps the connection, so a
    sequence reaches deep states); otherwise anything, including what the relay must refuse."""
    kinds, weights = VALID_KINDS if valid else CHAOS_KINDS
    kind = rng.choices(kinds, weights=weights)[0]
    if kind == "ping":
        return bytes([PING])
    if kind == "padding":
        return bytes(rng.randint(1, 40))
    if kind == "stream":
        if valid:
            offset = state["stream_offset"]
            data = bytes(rng.getrandbits(8) for _ in range(rng.choice([1, 2, 9, 40])))
            state["stream_offset"] += len(data)
            return stream_frame(0, offset, data)
        stream_id = rng.choice([0, 4, 8, 0, 1, 2, 3, rng.randint(0, 400)])
        offset = rng.choice([0, 0, rng.randint(0, 70000), rng.randint(0, 1 << 22)])
        data = bytes(rng.getrandbits(8) for _ in range(rng.choice([0, 1, 2, 9, 40])))
        return stream_frame(stream_id, offset, data, fin=rng.random() < 0.2)
    if kind == "crypto":
        message = rng.choice([bytes([0x18, 0, 0, 1, rng.randint(0, 1)]), bytes([0x04, 0, 0, 1, 0]), os.urandom(6)])
        return bytes([CRYPTO]) + varint(rng.choice([0, 0, 5, 1000])) + varint(len(message)) + message
    if kind == "ack":
        if session.received and (valid or rng.random() < 0.8):
            return ack_frame(session.received)
        if valid:
            return bytes([PING])
        return bytes([ACK]) + varint(rng.randint(0, 1000)) + varint(0) + varint(0) + varint(0)
    if kind == "datagram":
        data = bytes(rng.randint(0, 255) for _ in range(rng.choice([1, 20] if valid else [0, 1, 20])))
        return bytes([DATAGRAM_LEN]) + varint(len(data)) + data
    if kind == "ncid":
        fresh = state["next_seq"]
        if valid:
            # Fresh numbers, retiring enough older ones to stay within the relay's limit of 4 active IDs.
            state["next_seq"] = fresh + 1
            state["rpt"] = max(state["rpt"], fresh - 3, rng.choice([0, fresh - 1, fresh]) if rng.random() < 0.3 else 0)
            return ncid_frame(fresh, min(state["rpt"], fresh), rng)
        sequence = rng.choice([fresh, fresh, fresh, rng.randint(0, fresh + 2)])
        if sequence >= fresh:
            state["next_seq"] = sequence + 1
        retire_prior_to = rng.choice([0, state["rpt"], rng.randint(0, sequence)])
        retire_prior_to = min(retire_prior_to, sequence)
        state["rpt"] = max(state["rpt"], retire_prior_to)
        return ncid_frame(sequence, retire_prior_to, rng)
    if kind == "retire":
        return bytes([RETIRE_CONNECTION_ID]) + varint(rng.randint(0, 3 if valid else 9))
    if kind == "challenge":
        return bytes([PATH_CHALLENGE]) + os.urandom(8)
    if kind == "response":
        if session.challenges and (valid or rng.random() < 0.7):
            return bytes([PATH_RESPONSE]) + session.challenges.pop(0)[1]
        return bytes([PATH_RESPONSE]) + os.urandom(8)
    if kind == "max":
        frame = rng.choice([MAX_DATA, MAX_STREAMS_BIDI, MAX_STREAMS_UNI])
        value = rng.choice([1 << 20, 1 << 24] if valid else [0, 1, 1 << 20, (1 << 60) + 1])
        if rng.random() < 0.3:
            return bytes([MAX_STREAM_DATA]) + varint(0 if valid else rng.choice([0, 1, 4])) + varint(value)
        return bytes([frame]) + varint(value)
    if kind == "reset":
        return bytes([RESET_STREAM]) + varint(rng.choice([0, 4, 3])) + varint(0) + varint(rng.randint(0, 100))
    if kind == "stop":
        return bytes([STOP_SENDING]) + varint(rng.choice([0, 4, 3, 7])) + varint(0)
    if kind == "blocked":
        return rng.choice([bytes([DATA_BLOCKED]) + varint(5), bytes([STREAM_DATA_BLOCKED]) + varint(0) + varint(5),
                           bytes([STREAMS_BLOCKED_BIDI]) + varint(3)])
    if kind == "close":
        return bytes([CONNECTION_CLOSE]) + varint(0) + varint(0) + varint(0)
    return bytes([rng.choice([NEW_TOKEN, HANDSHAKE_DONE, 0x20, 0x2F])]) + os.urandom(3)


def run_random(session, rng, steps, ports, state, mode="mixed", forward_only=False):
    policy = Policy(rng, ports)
    newest_port = 0
    valid = mode == "valid" or (mode == "mixed" and rng.random() < 0.7)
    trace = [f"{'valid' if valid else 'chaos'} ack={policy.ack} answer={policy.answer} move={policy.move}"]
    for _ in range(steps):
        if session.closed is not None:
            break
        if forward_only:  # each move goes to a port never used before, never back
            if rng.random() < policy.move and newest_port + 1 < ports:
                newest_port += 1
            port = newest_port
        else:
            port = rng.randrange(ports) if rng.random() < policy.move else 0
        cid = session.current_cid
        if rng.random() < policy.move:
            cid = rng.choice(list(session.server_cids.values()))
        frames = b"".join(random_frame(rng, session, state, valid) for _ in range(rng.choice([1, 1, 2, 3])))
        trace.append(f"port {port} cid {cid.hex()[:8]} {frames.hex()}")
        session.send(frames, port=port, cid=cid)
        session.pump(rng.choice([0.0, 0.002, 0.01]))
        if policy.ack == "always" or (policy.ack == "sometimes" and rng.random() < 0.5):
            session.acknowledge(port=port)
        if policy.answer == "always" or (policy.answer == "sometimes" and rng.random() < 0.5):
            session.answer_challenges()
    if session.closed is None and rng.random() < 0.3:
        session.pump(rng.choice([0.1, 0.5]))  # let timers (path validation, retransmission) run
    return trace


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[-1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def new_totals():
    return {"sequences": 0, "steps": 0, "packets_sent": 0, "packets_received": 0, "closes": {}, "no_handshake": 0,
            "aborted": None}


def merge_totals(into, part):
    """Adds one worker's counts to `into` (closes by code summed, the first reason kept, the first abort kept)."""
    for key in ("sequences", "steps", "packets_sent", "packets_received", "no_handshake"):
        into[key] += part[key]
    for code, count in part["closes"].items():
        into["closes"][code] = into["closes"].get(code, 0) + count
    for code, reason in part.get("close_reasons", {}).items():
        into.setdefault("close_reasons", {}).setdefault(code, reason)
    if part.get("open_after_script"):
        into["open_after_script"] = True
    if part["aborted"] is not None:
        into.setdefault("aborts_seen", []).append(part["aborted"])
        into["aborted"] = into["aborted"] or part["aborted"]


def open_sockets(count, source):
    sockets = []
    for _ in range(count):
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind((source, 0))
        sockets.append(sock)
    return sockets


def run_sequences(args, server, indices, source, stop=None, report=None):
    """Runs the sequences numbered `indices` (sequence i uses seed --seed + i) from sockets bound to `source`;
    returns their totals. Stops early at --seconds, when `stop` is set, or when the relay died. Every 200
    sequences `report` (if given) receives the totals so far."""
    started = time.monotonic()
    totals = new_totals()
    ticket = None
    previous_trace = []
    for index in indices:
        if (args.seconds and time.monotonic() - started > args.seconds) or (stop is not None and stop.is_set()):
            break
        seed = args.seed + index
        rng = random.Random(seed)
        sockets = open_sockets(max(args.ports, 3), source)
        trace = []
        try:
            early_frames = None
            if args.early and ticket is not None:
                state = {"next_seq": 4, "rpt": 0, "stream_offset": 0}
                valid = args.mode == "valid" or (args.mode == "mixed" and rng.random() < 0.7)
                early_frames = [b"".join(random_frame(rng, _NoSession(), state, valid) for _ in range(2))
                                for _ in range(rng.randint(1, 3))]
                trace.append("0-RTT " + " ".join(frames.hex() for frames in early_frames))
            session, tickets = handshake(args, sockets, server, ticket=ticket if args.early else None,
                                         early_frames=early_frames)
            if tickets:
                ticket = tickets[-1]
            if session is None:
                totals["no_handshake"] += 1
                if not alive(args.relay_pid):
                    # It died after the previous sequence ended (a timer of that connection's, most likely).
                    totals["aborted"] = {"sequence": index, "seed": seed, "previous_steps": previous_trace}
                    break
                continue
            if args.script:
                run_script(args.script, session, rng)
            else:
                state = {"next_seq": 4, "rpt": 0, "stream_offset": 0}
                trace += run_random(session, rng, args.steps, max(args.ports, 3), state, args.mode,
                                    args.forward_only)
            totals["steps"] += len(trace)
            totals["packets_sent"] += session.packets_sent
            totals["packets_received"] += session.packets_received
            if session.closed is not None:
                key = f"0x{session.closed[0]:x}"
                totals["closes"][key] = totals["closes"].get(key, 0) + 1
                totals.setdefault("close_reasons", {}).setdefault(key, session.closed[1])
            elif args.script:
                totals["open_after_script"] = True
        finally:
            for sock in sockets:
                sock.close()
        totals["sequences"] += 1
        if not alive(args.relay_pid):
            totals["aborted"] = {"sequence": index, "seed": seed, "steps": trace, "previous_steps": previous_trace}
            break
        previous_trace = trace
        if report is not None and totals["sequences"] % 200 == 0:
            report(dict(totals, closes=dict(totals["closes"])))
    return totals


def worker_source(args, worker):
    """Worker w sends from 127.0.0.(2 + w) when the relay is on loopback and there are several workers, so each
    is its own source to the relay's per-source budgets, as separate phones would be."""
    if args.workers > 1 and args.host_address.startswith("127."):
        return f"127.0.0.{2 + worker}"
    return "127.0.0.1" if args.host_address.startswith("127.") else "0.0.0.0"


def run_parallel(args, server):
    """--workers processes, worker w running sequences w, w + W, w + 2W, ...; an abort seen by any stops all. Prints
    a progress line on stderr every --progress seconds."""
    context = multiprocessing.get_context("fork")
    stop, queue = context.Event(), context.Queue()

    def work(worker):
        indices = range(worker, args.sequences, args.workers)
        progress = lambda totals: queue.put(("progress", worker, totals))  # noqa: E731
        totals = run_sequences(args, server, indices, worker_source(args, worker), stop, progress)
        if totals["aborted"] is not None:
            stop.set()
        queue.put(("done", worker, totals))

    processes = [context.Process(target=work, args=(worker,)) for worker in range(args.workers)]
    for process in processes:
        process.start()
    latest, finished = {}, {}
    started = last_progress = time.monotonic()
    while len(finished) < len(processes):
        try:
            kind, worker, totals = queue.get(timeout=1.0)
        except Exception:  # queue.Empty: check for a worker that died without reporting
            if all(not process.is_alive() for process in processes) and queue.empty():
                break
            continue
        (finished if kind == "done" else latest)[worker] = totals
        if args.progress and time.monotonic() - last_progress >= args.progress:
            last_progress = time.monotonic()
            sofar = new_totals()
            for part in {**latest, **finished}.values():
                merge_totals(sofar, part)
            line = {"seconds": round(last_progress - started), "sequences": sofar["sequences"],
                    "steps": sofar["steps"], "no_handshake": sofar["no_handshake"]}
            print(json.dumps(line), file=sys.stderr, flush=True)
    for process in processes:
        process.join()
    totals = new_totals()
    for part in finished.values():
        merge_totals(totals, part)
    if len(finished) < len(processes):
        raise RuntimeError(f"{len(processes) - len(finished)} worker(s) ended without a report")
    return totals


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_relay_arguments(parser)
    parser.add_argument("--relay-pid", type=int, required=True)
    parser.add_argument("--sequences", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=0.0, help="stop after this long (0: no limit)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--ports", type=int, default=3)
    parser.add_argument("--mode", choices=["mixed", "valid", "chaos"], default="mixed",
                        help="valid: only frames a well-behaved client sends; chaos: anything; mixed: 70/30")
    parser.add_argument("--forward-only", action="store_true",
                        help="a sequence that moves goes to a port it never used, never back to an earlier one")
    parser.add_argument("--script")
    parser.add_argument("--early", action="store_true")
    parser.add_argument("--workers", type=int, default=1,
                        help="processes running sequences side by side (each its own loopback source address)")
    parser.add_argument("--progress", type=float, default=0.0,
                        help="with --workers above 1: a progress line on stderr every this many seconds")
    args = parser.parse_args()
    if args.workers < 1 or (args.script and args.workers > 1):
        raise ValueError("--workers must be 1 or more, and 1 with --script")

    args.host_address = socket.gethostbyname(args.host)
    server = (args.host_address, args.port)
    started = time.monotonic()
    if args.workers > 1:
        totals = run_parallel(args, server)
    else:
        count = 1 if args.script else args.sequences
        totals = run_sequences(args, server, range(count), worker_source(args, 0))
    totals["seconds"] = round(time.monotonic() - started, 1)
    print(json.dumps(totals), flush=True)
    if totals["aborted"] is not None:
        sys.exit(2)
    if totals["sequences"] and totals["no_handshake"] == totals["sequences"]:
        print("quic_state_fuzzer: no handshake completed with the relay", file=sys.stderr)
        sys.exit(1)


class _NoSession:
    """Stands in for a Session while 0-RTT frames are chosen (nothing received yet)."""
    received = set()
    challenges = []


if __name__ == "__main__":
    try:
        main()
    except (RuntimeError, ValueError, OSError) as error:
        print(f"quic_state_fuzzer: {error}", file=sys.stderr)
        sys.exit(1)
