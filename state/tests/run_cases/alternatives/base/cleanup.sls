# Leaves the machine without the test's link group.
drop-a:
  alternatives.remove:
    - name: brine-test-alt
    - path: {{ grains.work }}/a
