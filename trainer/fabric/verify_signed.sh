#!/bin/bash
# verify_signed.sh KEY_FILE FINGERPRINT SIGNATURE FILE
# Exit 0 only when SIGNATURE is a good signature of FILE by the key whose primary fingerprint
# is FINGERPRINT (40 hex digits, kept in the repository), whatever else KEY_FILE holds. A key
# fetched from the same host as the file proves nothing by itself: whoever can replace the
# file can replace the key; the fingerprint written here cannot be replaced with them.
# The EFA installer's key: AWS EC2 User Guide, "Get started with EFA and NCCL", step "Verify the
# GPG key's fingerprint" (4E90 91BC BB97 A96B 26B1 5E59 A054 80B1 DD2D 3CCC).
set -euo pipefail
key_file=$1 fingerprint=${2^^} signature=$3 file=$4
fingerprint=${fingerprint// /}
if [[ ! $fingerprint =~ ^[0-9A-F]{40}$ ]]; then
  echo "verify_signed.sh: '$2' is not a 40-hex-digit key fingerprint" >&2
  exit 2
fi
GNUPGHOME="$(mktemp -d)"
export GNUPGHOME
trap 'rm -rf "$GNUPGHOME"' EXIT
gpg --batch --quiet --import "$key_file" 2>/dev/null
# VALIDSIG <signing key fpr> ... <primary key fpr> (GnuPG doc/DETAILS): the last field names
# the primary key even when a subkey signed.
status="$(gpg --batch --status-fd 1 --verify "$signature" "$file" 2>/dev/null || true)"
if ! grep -Eq "^\[GNUPG:\] VALIDSIG .* ${fingerprint}\$" <<<"$status"; then
  echo "verify_signed.sh: $file is not signed by key $fingerprint" >&2
  exit 1
fi
