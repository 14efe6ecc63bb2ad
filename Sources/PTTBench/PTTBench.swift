// PTTBench: the measurements behind `ptt-transport bench` — connection setup in round trips, datagram rates,
// relay fan-out, handshake rate and memory per connection, on loopback or an emulated path. It reports; it never
// asserts, and its defaults are not tuned to flatter a figure.
