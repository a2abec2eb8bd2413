# Leaves the machine without the test's source lists.
drop-lists:
  cmd.run:
    - name: rm -f /etc/apt/sources.list.d/brine-test-*.list
