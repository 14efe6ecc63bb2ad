/*
 * CTransportShims: the few things Swift cannot call or import directly from ngtcp2 (0.12.1 or 1.x; what differs
 * between them is in ptt_ngtcp2_api.h), GnuTLS 3.7 and the Linux socket API (function-like versioned macros,
 * variadic callbacks, CMSG macros). It holds no state and no
 * protocol logic; every function is a thin, documented adapter.
 */
#ifndef PTT_SHIMS_H
#define PTT_SHIMS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include "ptt_frame_guard.h"
#include "ptt_ngtcp2_api.h"
#include "ptt_udp_batch.h"
#include "ptt_udp_recv_batch.h"
#include "ptt_reuseport.h"
#include "ptt_anti_replay.h"
#include "ptt_workers.h"
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <gnutls/gnutls.h>

/* ---- ngtcp2 versioned entry points ---- */
void ptt_settings_default(ngtcp2_settings *settings);
void ptt_transport_params_default(ngtcp2_transport_params *params);
int ptt_conn_client_new(ngtcp2_conn **pconn, const ngtcp2_cid *dcid, const ngtcp2_cid *scid,
                        const ngtcp2_path *path, uint32_t version, const ngtcp2_callbacks *callbacks,
                        const ngtcp2_settings *settings, const ngtcp2_transport_params *params,
                        void *user_data);
int ptt_conn_server_new(ngtcp2_conn **pconn, const ngtcp2_cid *dcid, const ngtcp2_cid *scid,
                        const ngtcp2_path *path, uint32_t version, const ngtcp2_callbacks *callbacks,
                        const ngtcp2_settings *settings, const ngtcp2_transport_params *params,
                        void *user_data);
/* Reads one packet with `guard` as the frame guard its decrypt callback consults (see ptt_frame_guard.h); every
 * read of a connection must pass that connection's guard. */
int ptt_conn_read_pkt(ngtcp2_conn *conn, ptt_frame_guard *guard, const ngtcp2_path *path, uint32_t ecn,
                      const uint8_t *pkt, size_t pktlen, ngtcp2_tstamp ts);
/* The two writes that can send a PATH_CHALLENGE, with the connection's frame guard for the encrypt callback. */
ngtcp2_ssize ptt_conn_writev_stream(ngtcp2_conn *conn, ptt_frame_guard *guard, ngtcp2_path *path, uint32_t *ecn,
                                    uint8_t *dest, size_t destlen, ngtcp2_ssize *pdatalen, uint32_t flags,
                                    int64_t stream_id, const ngtcp2_vec *datav, size_t datavcnt, ngtcp2_tstamp ts);
ngtcp2_ssize ptt_conn_writev_datagram(ngtcp2_conn *conn, ptt_frame_guard *guard, ngtcp2_path *path,
                                      uint32_t *ecn, uint8_t *dest, size_t destlen, int *paccepted, uint32_t flags,
                                      uint64_t dgram_id, const ngtcp2_vec *datav, size_t datavcnt, ngtcp2_tstamp ts);
ngtcp2_ssize ptt_conn_write_connection_close(ngtcp2_conn *conn, ngtcp2_path *path, uint8_t *dest,
                                             size_t destlen, const ptt_ccerr *ccerr, ngtcp2_tstamp ts);

/* Sizes that are function-like macros in ngtcp2_crypto.h. */
size_t ptt_crypto_max_regular_tokenlen(void);
size_t ptt_crypto_max_retry_tokenlen(void);

/* ---- ngtcp2 logging: a real C function for the variadic log_printf callback ---- */
/* Prints ngtcp2's debug log to stderr, prefixed; install it only when debugging. */
void ptt_log_printf(void *user_data, const char *format, ...);
/* Installs ptt_log_printf as settings->log_printf (Swift cannot form a variadic function pointer). */
void ptt_settings_enable_log(ngtcp2_settings *settings);

/* ---- GnuTLS flags whose C enum types are ambiguous to Swift ---- */
/* gnutls_free is a macro over a function pointer; this frees memory GnuTLS allocated. */
void ptt_gnutls_free(void *pointer);
unsigned int ptt_gnutls_client_flags(void);
unsigned int ptt_gnutls_server_flags(void);
/* TLS over TCP (QMux): non-blocking sessions; servers may send right after their Finished on full handshakes
 * (GnuTLS "early start"; see TLSStreamSession); clients enable early data by queueing it. */
unsigned int ptt_gnutls_stream_client_flags(void);
unsigned int ptt_gnutls_stream_server_flags(int accept_early_data); /* early data needs an anti-replay store */

/* ---- UDP sockets: recvmsg/sendmsg with ECN and the local address (IP_PKTINFO / IPV6_PKTINFO) ---- */
/* Enables ECN and packet-info reporting on a UDP socket of the given family. Returns 0 or -errno. */
int ptt_udp_enable_cmsgs(int fd, int family);
/*
 * Receives one datagram. Fills remote/local addresses (local only when pktinfo is enabled and the socket is not
 * connected; otherwise *locallen is 0) and the ECN codepoint. Returns the length or -errno.
 */
ssize_t ptt_udp_recv(int fd, uint8_t *buf, size_t buflen, struct sockaddr_storage *remote, socklen_t *remotelen,
                     struct sockaddr_storage *local, socklen_t *locallen, uint32_t *ecn);
/*
 * Sends one datagram (remote NULL on a connected socket), setting the ECN codepoint and, when local is non-NULL,
 * the source address. With segment_size > 0 and a buffer longer than it, uses UDP GSO. Returns bytes or -errno.
 */
ssize_t ptt_udp_send(int fd, const uint8_t *buf, size_t buflen, const struct sockaddr *remote, socklen_t remotelen,
                     const struct sockaddr *local, socklen_t locallen, uint32_t ecn, size_t segment_size);
/* accept4 with SOCK_NONBLOCK | SOCK_CLOEXEC (a GNU extension Swift's Glibc module does not expose). */
int ptt_tcp_accept(int fd, struct sockaddr_storage *remote, socklen_t *remotelen);
/* Bytes written to a TCP socket that the peer has not acknowledged yet (SIOCOUTQ), or -errno. */
int ptt_tcp_unsent_bytes(int fd);
/* The kernel's RTT estimate of a TCP connection (TCP_INFO, microseconds) and whether the peer acknowledged data
 * sent in the SYN (TCP Fast Open). 0 or -errno. */
int ptt_tcp_info(int fd, uint32_t *rtt_us, uint32_t *rttvar_us, int *syn_data_acked);
/* Whether the kernel accepts UDP_SEGMENT on this socket (GSO). */
int ptt_udp_gso_supported(int fd);
/* Names the calling thread (the kernel keeps the first 15 bytes): what profilers and `top -H` show. 0 or an errno. */
int ptt_name_this_thread(const char *name);

#endif
