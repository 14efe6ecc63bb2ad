#!/usr/bin/env bash
# Regenerates the TEST PKI of PTTTransport with GnuTLS' certtool (Debian: gnutls-bin), in this script's folder.
#
# FOR TESTS ONLY. The private keys are committed on purpose so that tests and CI need no setup.
# Never use any of these files (or this CA) in production, and never trust ca.pem outside the test suite.
#
#   ca.pem/ca.key               "PTTTransport Test CA" (ECDSA P-256, 20 years)
#   server.pem/server.key       leaf for localhost, 127.0.0.1, ::1, 198.18.0.2 (the benchmark's emulated host),
#                               signed by ca; server.pem holds the leaf only
#   expired.pem/expired.key     same names, signed by ca, validity entirely in the past (2020-01-01 .. 2021-01-01)
#   other-ca.pem/other-ca.key   an unrelated CA
#   untrusted.pem/untrusted.key leaf for localhost, 127.0.0.1, ::1 signed by other-ca (must fail against ca.pem)
#   client.pem/client.key       a TLS client leaf ("ptt-relay test client") signed by ca: the relay's certificate for
#                               a Redis that asks for one (tls-auth-clients yes)
#
# Re-runnable: every run replaces all files (fresh keys, fixed serials).
set -euo pipefail
cd "$(dirname "$0")"
command -v certtool >/dev/null || { echo "certtool not found: apt-get install gnutls-bin" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Runs certtool quietly (it narrates on stderr), but shows what it said if it fails.
quiet() {
  if ! "$@" 2>"$work/stderr" >/dev/null; then
    cat "$work/stderr" >&2
    echo "failed: $*" >&2
    exit 1
  fi
}

# An ECDSA P-256 key whose ECPrivateKey (RFC 5915) carries the 32-byte private value the RFC requires.
# certtool 3.7 writes the value as a DER integer (33 bytes when its top bit is set, fewer with leading
# zeros); GnuTLS reads that back, but other stacks (Python's cryptography, hence aioquic) reject it.
key() {  # file
  local attempt prefix
  for attempt in $(seq 1 64); do
    quiet certtool --generate-privkey --key-type=ecdsa --curve=secp256r1 --outfile "$1"
    # SEQUENCE(30 77) { INTEGER 1 (02 01 01), OCTET STRING of 32 bytes (04 20) ... }
    prefix=$(sed -n '/-----BEGIN/,/-----END/p' "$1" | grep -v -- ----- | base64 -d | od -An -tx1 -N7 | tr -d ' \n')
    [[ $prefix == 30770201010420 ]] && return 0
  done
  echo "could not generate a well-formed P-256 key in $attempt attempts" >&2
  exit 1
}

ca() {  # name cn serial
  key "$1.key"
  cat > "$work/$1.tmpl" <<TEMPLATE
cn = "$2"
serial = $3
ca
cert_signing_key
crl_signing_key
expiration_days = 7305
TEMPLATE
  quiet certtool --generate-self-signed --load-privkey "$1.key" --template "$work/$1.tmpl" --outfile "$1.pem"
}

leaf() {  # name issuer serial validity-lines [extra-ip]
  key "$1.key"
  cat > "$work/$1.tmpl" <<TEMPLATE
cn = "localhost"
serial = $3
dns_name = "localhost"
ip_address = "127.0.0.1"
ip_address = "::1"
${5:+ip_address = \"$5\"}
tls_www_server
signing_key
$4
TEMPLATE
  quiet certtool --generate-certificate --load-privkey "$1.key" --load-ca-certificate "$2.pem" \
    --load-ca-privkey "$2.key" --template "$work/$1.tmpl" --outfile "$1.pem"
}

client() {  # name issuer serial
  key "$1.key"
  cat > "$work/$1.tmpl" <<TEMPLATE
cn = "ptt-relay test client"
serial = $3
tls_www_client
signing_key
expiration_days = 7305
TEMPLATE
  quiet certtool --generate-certificate --load-privkey "$1.key" --load-ca-certificate "$2.pem" \
    --load-ca-privkey "$2.key" --template "$work/$1.tmpl" --outfile "$1.pem"
}

past=$'activation_date = "2020-01-01 00:00:00 UTC"\nexpiration_date = "2021-01-01 00:00:00 UTC"'
ca ca "PTTTransport Test CA" 1
ca other-ca "Unrelated Test CA (not trusted by the tests)" 2
leaf server ca 10 "expiration_days = 7305" 198.18.0.2
leaf expired ca 11 "$past" 198.18.0.2
leaf untrusted other-ca 12 "expiration_days = 7305"
client client ca 13
chmod 644 ./*.pem ./*.key

# Self-check: the server leaf verifies, the other two must not.
verify() {  # file expected-text (certtool exits non-zero for a certificate it does not trust)
  local out
  out=$(certtool --verify --load-ca-certificate ca.pem --infile "$1" 2>&1 || true)
  [[ $out == *"Chain verification output: $2"* ]]
}
verify server.pem "Verified. The certificate is trusted" || { echo "server.pem does not verify against ca.pem" >&2; exit 1; }
verify client.pem "Verified. The certificate is trusted" || { echo "client.pem does not verify against ca.pem" >&2; exit 1; }
verify expired.pem "Not verified. The certificate is NOT trusted. The certificate chain uses expired certificate" || { echo "expired.pem is not reported as expired" >&2; exit 1; }
verify untrusted.pem "Not verified. The certificate is NOT trusted. The certificate issuer is unknown" || { echo "untrusted.pem unexpectedly verifies" >&2; exit 1; }
echo "test certificates written to $(pwd)"
