# An authorized keys file with comments, blank lines, options and a key listed twice; key
# files to take keys from.
cat > "$1/authorized_keys" <<'KEYS'
# managed by hand

ssh-rsa a2V5LW9uZS0wMDAw old-comment
command="ls",no-pty ssh-ed25519 a2V5LXR3by0wMDAwMA== with options
ssh-dss a2V5LXNldmVuLTAwMDA= first
ssh-dss a2V5LXNldmVuLTAwMDA= second
not a key line at all
KEYS
printf 'ssh-rsa a2V5LWZpdmUtMDAwMDA= from-file\necdsa-sha2-nistp256 a2V5LXNpeC0wMDAwMDA= other@host\n' > "$1/team.pub"
printf '# no keys in here\n' > "$1/empty.pub"
cat > "$1/managed_keys" <<'KEYS'
ssh-rsa a2V5LW9uZS0wMDAw keep
ssh-rsa a2V5LXRocmVlLTAwMA== drop-me
KEYS
