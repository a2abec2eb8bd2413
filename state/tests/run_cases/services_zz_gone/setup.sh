# The services cases' init scripts stopped and removed: the machine is left as it was, and the
# states below meet services that do not exist.
for svc in brinetest-a brinetest-b; do
  [ -x /etc/init.d/$svc ] && /etc/init.d/$svc stop >/dev/null 2>&1
  rm -f /etc/init.d/$svc /etc/rc?.d/[SK][0-9][0-9]$svc /run/$svc.pid
done
exit 0
