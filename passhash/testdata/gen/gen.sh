#!/bin/sh
# Makes the test vectors in passhash/testdata (one JSON file per format)
# with the libraries the systems that write each format use: Python's
# passlib and Django, PHP's password_hash, Node's better-auth and bcryptjs.
# Run by hand; the vectors are committed, so CI needs none of these tools.
# Salts are random: each run writes new hashes.
#
# Needs (Debian): apt-get install python3-passlib python3-django
#   python3-argon2 python3-bcrypt php-cli; and node with npm.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$here/package.json" "$here/gen.mjs" "$work/"
(cd "$work" && npm install --no-audit --no-fund --silent)
/usr/bin/python3 "$here/gen.py" "$here/gen.php" "$work/gen.mjs" "$here/.."
