# Leaves no mask of the test's unit behind (where systemd does not run, masking the unit
# works but the check after it fails, in Salt as in Brine).
drop-mask:
  cmd.run:
    - name: rm -f /etc/systemd/system/brine-test-masks.service /run/systemd/system/brine-test-masks.service
