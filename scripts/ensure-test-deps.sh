#!/bin/sh
# ensure-test-deps.sh: make redis-server, redis-cli (and curl, which the
# README's commands use and e2e/readme_test.go runs, and node and npm,
# which install, compile and run examples/edge-worker's TypeScript in
# e2e/httpapi_edge_test.go, and chromium, which loads the admin page in
# e2e/limited_test.go) available for the tests.
#
# When one is missing from PATH and apt-get is available, installs the
# redis-server, redis-tools, curl and nodejs packages, and npm when npm is
# missing (Debian's nodejs only suggests it; a Node.js that brings its own
# npm keeps it), and chromium when missing (quietly; with sudo when not
# root).
# Otherwise it does nothing and exits 0: the tests then skip, or fail when
# CI=true. It never starts the system Redis service: tests start their own
# redis-server processes on free loopback ports.
set -eu

if command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1 && command -v curl >/dev/null 2>&1 && command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 && command -v chromium >/dev/null 2>&1; then
	exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "ensure-test-deps: redis-server/redis-cli missing and no apt-get; install Redis yourself" >&2
	exit 0
fi

SUDO=
if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null 2>&1; then
		SUDO="sudo -n"
	else
		echo "ensure-test-deps: not root and no sudo; install redis-server and redis-tools yourself" >&2
		exit 0
	fi
fi

PKGS="redis-server redis-tools curl nodejs"
if ! command -v npm >/dev/null 2>&1; then
	PKGS="$PKGS npm"
fi
if ! command -v chromium >/dev/null 2>&1; then
	PKGS="$PKGS chromium"
fi
echo "ensure-test-deps: installing $PKGS with apt-get" >&2
# policy-rc.d exit 101 keeps dpkg from starting the redis-server service.
POLICY=/usr/sbin/policy-rc.d
ADDED_POLICY=
if [ ! -e "$POLICY" ]; then
	printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$POLICY" >/dev/null
	$SUDO chmod +x "$POLICY"
	ADDED_POLICY=1
fi
status=0
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null || status=$?
if [ "$status" -eq 0 ]; then
	$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $PKGS ca-certificates >/dev/null || status=$?
fi
if [ -n "$ADDED_POLICY" ]; then
	$SUDO rm -f "$POLICY"
fi
exit "$status"
