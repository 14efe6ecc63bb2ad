@_exported public import enum TransportCore.CloseReason
@_exported public import struct TransportCore.QUICLBConfiguration
// PTTTransport: the public async API of the push-to-talk transport — clients, servers, connections, message
// streams and audio datagrams over QUIC (and QMux over TCP). It imports no C module and never blocks a caller's
// thread; all protocol state lives on event loops in TransportIO and TransportCore.
@_exported public import struct TransportCore.TransportError
