# The hosts file of the case (the minion option hosts.file names it), not the machine's.
cat > "$1/hosts" <<'HOSTS'
# hosts of the test
127.0.0.1	localhost
127.0.1.1	m1.example.com m1  # the minion

10.0.0.1	alpha alpha.example.com
10.0.0.2	beta # second
10.0.0.1	alpha2
::1	localhost ip6-localhost ip6-loopback
10.0.0.9	gone
192.168.5.5 onlyme other
badaddr somehost
HOSTS
