# A unit of the test's own: masked, masked for this boot, unmasked again (where systemd does
# not run, systemctl masks the unit but refuses to query it afterwards, and Salt's states
# fail on that refusal).
mask:
  service.masked:
    - name: brine-test-masks

mask-runtime:
  service.masked:
    - name: brine-test-masks
    - runtime: True

unmask-runtime:
  service.unmasked:
    - name: brine-test-masks
    - runtime: True

unmask:
  service.unmasked:
    - name: brine-test-masks
