# A known_hosts file of the case's own: two hosts, one of them with an old key.
printf 'other.example ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAAgQC7\nold.example ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBv1VQHQ7k7nVjzQ0yM8gQZbbD7b2cLkG1s8W5b9RdZm\n' > "$1/known_hosts"
