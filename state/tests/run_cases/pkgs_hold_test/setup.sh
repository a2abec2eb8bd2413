# Debian's tiny `hello` installed and held, `sl` installed, neither changed by the run.
printf 'hello install\nsl install\n' | dpkg --set-selections >/dev/null 2>&1 || true
DEBIAN_FRONTEND=noninteractive apt-get -q -y install hello sl >/dev/null 2>&1 || true
printf 'hello hold\n' | dpkg --set-selections >/dev/null 2>&1 || true
