#define _GNU_SOURCE
#include "ptt_shims.h"

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <ngtcp2/ngtcp2_crypto.h>


void ptt_settings_default(ngtcp2_settings *settings) { ngtcp2_settings_default(settings); }

void ptt_transport_params_default(ngtcp2_transport_params *params) { ngtcp2_transport_params_default(params); }

int ptt_conn_client_new(ngtcp2_conn **pconn, const ngtcp2_cid *dcid, const ngtcp2_cid *scid,
                        const ngtcp2_path *path, uint32_t version, const ngtcp2_callbacks *callbacks,
                        const ngtcp2_settings *settings, const ngtcp2_transport_params *params,
                        void *user_data) {
  return ngtcp2_conn_client_new(pconn, dcid, scid, path, version, callbacks, settings, params, NULL, user_data);
}

int ptt_conn_server_new(ngtcp2_conn **pconn, const ngtcp2_cid *dcid, const ngtcp2_cid *scid,
                        const ngtcp2_path *path, uint32_t version, const ngtcp2_callbacks *callbacks,
                        const ngtcp2_settings *settings, const ngtcp2_transport_params *params,
                        void *user_data) {
  return ngtcp2_conn_server_new(pconn, dcid, scid, path, version, callbacks, settings, params, NULL, user_data);
}

int ptt_conn_read_pkt(ngtcp2_conn *conn, ptt_frame_guard *guard, const ngtcp2_path *path, uint32_t ecn,
                      const uint8_t *pkt, size_t pktlen, ngtcp2_tstamp ts) {
  ngtcp2_pkt_info pi = {.ecn = (uint8_t)ecn};
  ptt_frame_guard *previous = ptt_frame_guard_swap_current(guard);
  int rv = ngtcp2_conn_read_pkt(conn, path, &pi, pkt, pktlen, ts);
  ptt_frame_guard_swap_current(previous);
  return rv;
}

ngtcp2_ssize ptt_conn_writev_stream(ngtcp2_conn *conn, ptt_frame_guard *guard, ngtcp2_path *path, uint32_t *ecn,
                                    uint8_t *dest, size_t destlen, ngtcp2_ssize *pdatalen, uint32_t flags,
                                    int64_t stream_id, const ngtcp2_vec *datav, size_t datavcnt, ngtcp2_tstamp ts) {
  ngtcp2_pkt_info pi = {0};
  ptt_frame_guard *previous = ptt_frame_guard_swap_current(guard);
  ngtcp2_ssize n =
      ngtcp2_conn_writev_stream(conn, path, &pi, dest, destlen, pdatalen, flags, stream_id, datav, datavcnt, ts);
  ptt_frame_guard_swap_current(previous);
  if (ecn) *ecn = pi.ecn;
  return n;
}

ngtcp2_ssize ptt_conn_writev_datagram(ngtcp2_conn *conn, ptt_frame_guard *guard, ngtcp2_path *path,
                                      uint32_t *ecn, uint8_t *dest, size_t destlen, int *paccepted, uint32_t flags,
                                      uint64_t dgram_id, const ngtcp2_vec *datav, size_t datavcnt, ngtcp2_tstamp ts) {
  ngtcp2_pkt_info pi = {0};
  ptt_frame_guard *previous = ptt_frame_guard_swap_current(guard);
  ngtcp2_ssize n = ngtcp2_conn_writev_datagram(conn, path, &pi, dest, destlen, paccepted, flags, dgram_id, datav,
                                               datavcnt, ts);
  ptt_frame_guard_swap_current(previous);
  if (ecn) *ecn = pi.ecn;
  return n;
}

ngtcp2_ssize ptt_conn_write_connection_close(ngtcp2_conn *conn, ngtcp2_path *path, uint8_t *dest,
                                             size_t destlen, const ptt_ccerr *ccerr, ngtcp2_tstamp ts) {
  ngtcp2_pkt_info pi = {0};
  return ngtcp2_conn_write_connection_close(conn, path, &pi, dest, destlen, ccerr, ts);
}

size_t ptt_crypto_max_regular_tokenlen(void) { return NGTCP2_CRYPTO_MAX_REGULAR_TOKENLEN; }
size_t ptt_crypto_max_retry_tokenlen(void) { return NGTCP2_CRYPTO_MAX_RETRY_TOKENLEN; }

void ptt_log_printf(void *user_data, const char *format, ...) {
  (void)user_data;
  va_list ap;
  va_start(ap, format);
  fputs("ngtcp2: ", stderr);
  vfprintf(stderr, format, ap);
  fputc('\n', stderr);
  va_end(ap);
}

void ptt_settings_enable_log(ngtcp2_settings *settings) { settings->log_printf = ptt_log_printf; }

void ptt_gnutls_free(void *pointer) { gnutls_free(pointer); }

unsigned int ptt_gnutls_client_flags(void) {
  return GNUTLS_CLIENT | GNUTLS_ENABLE_EARLY_DATA | GNUTLS_NO_END_OF_EARLY_DATA;
}

unsigned int ptt_gnutls_stream_client_flags(void) {
  return GNUTLS_CLIENT | GNUTLS_NONBLOCK;
}

unsigned int ptt_gnutls_stream_server_flags(int accept_early_data) {
  return GNUTLS_SERVER | GNUTLS_NONBLOCK | GNUTLS_ENABLE_EARLY_START | (accept_early_data ? GNUTLS_ENABLE_EARLY_DATA : 0);
}

unsigned int ptt_gnutls_server_flags(void) {
  return GNUTLS_SERVER | GNUTLS_ENABLE_EARLY_DATA | GNUTLS_NO_AUTO_SEND_TICKET | GNUTLS_NO_END_OF_EARLY_DATA;
}

int ptt_udp_enable_cmsgs(int fd, int family) {
  int on = 1;
  if (family == AF_INET6) {
    if (setsockopt(fd, IPPROTO_IPV6, IPV6_RECVTCLASS, &on, sizeof(on)) != 0) return -errno;
    if (setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &on, sizeof(on)) != 0) return -errno;
  } else {
    if (setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &on, sizeof(on)) != 0) return -errno;
    if (setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &on, sizeof(on)) != 0) return -errno;
  }
  return 0;
}

ssize_t ptt_udp_recv(int fd, uint8_t *buf, size_t buflen, struct sockaddr_storage *remote, socklen_t *remotelen,
                     struct sockaddr_storage *local, socklen_t *locallen, uint32_t *ecn) {
  struct iovec iov = {.iov_base = buf, .iov_len = buflen};
  uint8_t control[256];
  struct msghdr msg;
  memset(&msg, 0, sizeof(msg));
  msg.msg_name = remote;
  msg.msg_namelen = sizeof(*remote);
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  do {
    n = recvmsg(fd, &msg, MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return -errno;
  *remotelen = msg.msg_namelen;
  ptt_udp_parse_cmsgs(&msg, local, locallen, ecn);
  return n;
}

ssize_t ptt_udp_send(int fd, const uint8_t *buf, size_t buflen, const struct sockaddr *remote, socklen_t remotelen,
                     const struct sockaddr *local, socklen_t locallen, uint32_t ecn, size_t segment_size) {
  struct iovec iov = {.iov_base = (void *)buf, .iov_len = buflen};
  uint8_t control[128];
  struct msghdr msg;
  memset(&msg, 0, sizeof(msg));
  msg.msg_name = (void *)remote;
  msg.msg_namelen = remote ? remotelen : 0;
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  int family = remote ? remote->sa_family : (local && locallen ? local->sa_family : 0);
  if (family == 0) family = ptt_socket_family(fd); /* a connected socket: no address names the family */
  size_t used = ptt_udp_fill_cmsgs(control, sizeof(control), family, local, locallen, ecn,
                                   segment_size > 0 && buflen > segment_size ? segment_size : 0);
  msg.msg_controllen = used;
  if (used == 0) msg.msg_control = NULL;
  ssize_t n;
  do {
    n = sendmsg(fd, &msg, MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  return n < 0 ? -errno : n;
}

int ptt_udp_gso_supported(int fd) {
  int seg = 0;
  socklen_t len = sizeof(seg);
  return getsockopt(fd, SOL_UDP, UDP_SEGMENT, &seg, &len) == 0;
}

int ptt_tcp_accept(int fd, struct sockaddr_storage *remote, socklen_t *remotelen) {
  return accept4(fd, (struct sockaddr *)remote, remotelen, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

int ptt_tcp_unsent_bytes(int fd) {
  int value = 0;
  if (ioctl(fd, SIOCOUTQ, &value) != 0) return -errno;
  return value;
}

int ptt_tcp_info(int fd, uint32_t *rtt_us, uint32_t *rttvar_us, int *syn_data_acked) {
  struct tcp_info info;
  socklen_t length = sizeof(info);
  memset(&info, 0, sizeof(info));
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &length) != 0) return -errno;
  *rtt_us = info.tcpi_rtt;
  *rttvar_us = info.tcpi_rttvar;
  *syn_data_acked = (info.tcpi_options & TCPI_OPT_SYN_DATA) != 0;
  return 0;
}

int ptt_name_this_thread(const char *name) {
  char truncated[16];
  snprintf(truncated, sizeof(truncated), "%s", name);
  return pthread_setname_np(pthread_self(), truncated);
}
