# No mask of the test's unit from an earlier run (systemctl leaves a link to /dev/null).
rm -f /etc/systemd/system/brine-test-masks.service /run/systemd/system/brine-test-masks.service
