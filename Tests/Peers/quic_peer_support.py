"""What the aioquic test clients in this folder share: the varint encoding, the arguments that say where the relay
is and how to trust it, and a verified client configuration. Imported by the peers (Python puts a script's own
folder on the import path)."""
import ssl

from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.packet import QuicProtocolVersion


def varint(value):
    """A QUIC variable-length integer (RFC 9000 section 16)."""
    for length, flag in ((1, 0), (2, 0x40), (4, 0x80), (8, 0xC0)):
        if value < 1 << (8 * length - 2):
            return (value | (flag << (8 * length - 8))).to_bytes(length, "big")
    raise ValueError(f"{value} does not fit in a QUIC varint")


def add_relay_arguments(parser):
    """HOST PORT --ca PEM [--server-name localhost] [--alpn ptt/1]."""
    parser.add_argument("host")
    parser.add_argument("port", type=int)
    parser.add_argument("--ca", required=True)
    parser.add_argument("--server-name", default="localhost")
    parser.add_argument("--alpn", default="ptt/1")


def client_configuration(args, ticket=None, **extra):
    """A client configuration that verifies the relay's certificate against --ca for --server-name, with DATAGRAM
    frames on (65,536 bytes) and `ticket` to resume; `extra` sets other QuicConfiguration fields. QUIC v1 only unless
    `extra` says otherwise: the packets these peers forge are v1's, and a relay on ngtcp2 1.x moves a client that also
    offers v2 there (RFC 9368)."""
    extra.setdefault("supported_versions", [QuicProtocolVersion.VERSION_1])
    config = QuicConfiguration(is_client=True, alpn_protocols=[args.alpn], max_datagram_frame_size=65536, **extra)
    config.load_verify_locations(args.ca)
    config.verify_mode = ssl.CERT_REQUIRED
    config.server_name = args.server_name
    config.session_ticket = ticket
    return config
