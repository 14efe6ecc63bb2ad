// PTTTalkGroups: talk groups on top of PTTTransport — channels that forward a talker's audio to every listener on
// the relay's event loops, floor control, liveness, and the reference relays. It never touches ngtcp2 or GnuTLS and
// never blocks an event loop; it reaches the transport only through PTTTransport's API and its package seams.
