#!/bin/sh
# The official image's entrypoint is the binary itself; this one says what it is first.
echo "laglab stand-in: $(/usr/bin/prometheus --version 2>&1 | head -n 1) (Debian package)"
exec /usr/bin/prometheus "$@"
