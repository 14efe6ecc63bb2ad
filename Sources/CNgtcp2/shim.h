/* The system headers of ngtcp2 0.12.1, its GnuTLS crypto backend, and GnuTLS 3.7 (Debian bookworm). */
#ifndef PTT_CNGTCP2_SHIM_H
#define PTT_CNGTCP2_SHIM_H
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <gnutls/crypto.h>
#endif
