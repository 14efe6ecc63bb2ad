// PTTMatrix: the QUIC interop runner's test cases, adapted to push-to-talk, run on the emulated path (network
// namespaces and the TUN delay line) with our client and relay and with aioquic on either side. It judges each
// case from the path's own counters and the endpoints' results, never from our transport's logs.
