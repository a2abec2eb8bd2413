# Debian's tiny `hello` and `sl` installed; `hello` held when the case asks for it.
printf 'hello install\nsl install\n' | dpkg --set-selections >/dev/null 2>&1 || true
DEBIAN_FRONTEND=noninteractive apt-get -q -y install hello sl >/dev/null 2>&1 || true
