// PTTBench: the measurements behind `ptt-lab bench` — connection setup in round trips, datagram rates,
// relay fan-out, handshake rate and memory per connection per side, on loopback or an emulated path, next to the
// aioquic echo server where it is installed. It reports; it never asserts, and its defaults are not tuned to
// flatter a figure.
