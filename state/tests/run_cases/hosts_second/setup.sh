# The hosts file of the case (the minion option hosts.file names it), not the machine's.
cat > "$1/hosts" <<'HOSTS'
127.0.0.1	localhost
10.0.0.1	alpha
10.0.0.9	stale
HOSTS
