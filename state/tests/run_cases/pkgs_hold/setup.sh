# Real packages: Debian's tiny `hello` and `sl`, not held and absent before each run.
printf 'hello install\nsl install\n' | dpkg --set-selections >/dev/null 2>&1 || true
DEBIAN_FRONTEND=noninteractive apt-get -q -y purge hello sl >/dev/null 2>&1 || true
