#!/usr/bin/env bash
# Regenerates the TEST PKI of PTTTransport with GnuTLS' certtool (Debian: gnutls-bin).
# FOR TESTS ONLY: the private keys are committed on purpose. Never use these files in production.
#   ca.pem/ca.key              test CA (ECDSA P-256, 20 years)
#   server.pem/server.key      leaf for localhost, 127.0.0.1, ::1, 198.18.0.2 (the benchmark's emulated host)
#   expired.pem/expired.key    same names, validity entirely in the past (2020-2021)
#   other-ca.pem/other-ca.key  an unrelated CA
#   untrusted.pem/untrusted.key leaf for localhost signed by the unrelated CA
set -euo pipefail
cd "$(dirname "$0")"
command -v certtool >/dev/null || { echo "certtool not found: apt-get install gnutls-bin" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

key() { certtool --generate-privkey --key-type=ecdsa --curve=secp256r1 --outfile "$1" 2>/dev/null; }

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
  certtool --generate-self-signed --load-privkey "$1.key" --template "$work/$1.tmpl" --outfile "$1.pem" 2>/dev/null
}

leaf() {  # name issuer serial validity-lines
  key "$1.key"
  cat > "$work/$1.tmpl" <<TEMPLATE
cn = "localhost"
serial = $3
dns_name = "localhost"
ip_address = "127.0.0.1"
ip_address = "::1"
ip_address = "198.18.0.2"
tls_www_server
signing_key
$4
TEMPLATE
  certtool --generate-certificate --load-privkey "$1.key" --load-ca-certificate "$2.pem" \
    --load-ca-privkey "$2.key" --template "$work/$1.tmpl" --outfile "$1.pem" 2>/dev/null
}

ca ca "PTTTransport Test CA" 1
ca other-ca "Unrelated Test CA" 2
leaf server ca 10 "expiration_days = 7305"
leaf expired ca 11 $'activation_date = "2020-01-01 00:00:00 UTC"\nexpiration_date = "2021-01-01 00:00:00 UTC"'
leaf untrusted other-ca 12 "expiration_days = 7305"
chmod 644 ./*.pem ./*.key
echo "test certificates written to $(pwd)"
