# Two init scripts managing a sleeping daemon each through a pid file; both stopped, not
# started at boot.
for svc in brinetest-a brinetest-b; do
  [ -x /etc/init.d/$svc ] && /etc/init.d/$svc stop >/dev/null 2>&1
  cat >/etc/init.d/$svc <<SCRIPT
#!/bin/sh
### BEGIN INIT INFO
# Provides:          $svc
# Required-Start:
# Required-Stop:
# Default-Start:     2 3 4 5
# Default-Stop:      0 1 6
# Short-Description: Brine's test service
### END INIT INFO
PIDFILE=/run/$svc.pid
case "\$1" in
  start) start-stop-daemon --start --quiet --background --make-pidfile --pidfile \$PIDFILE --exec /bin/sleep -- 3600 ;;
  stop) start-stop-daemon --stop --quiet --oknodo --retry 5 --pidfile \$PIDFILE; rm -f \$PIDFILE ;;
  restart|reload|force-reload) "\$0" stop && "\$0" start ;;
  status) start-stop-daemon --status --pidfile \$PIDFILE ;;
  *) echo "Usage: \$0 {start|stop|restart|reload|status}" >&2; exit 3 ;;
esac
SCRIPT
  chmod 755 /etc/init.d/$svc
  rm -f /etc/rc?.d/[SK][0-9][0-9]$svc
done
