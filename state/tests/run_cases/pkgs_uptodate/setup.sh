# hello and sl are not installed.
DEBIAN_FRONTEND=noninteractive apt-get -q -y purge hello sl >/dev/null 2>&1 || true
