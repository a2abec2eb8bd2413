# A unit of the test's own: masked, masked for this boot, unmasked again (where systemd does
# not run, systemctl refuses each query, and so do Salt's states).
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
