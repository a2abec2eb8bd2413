# pkg.del_repo refreshes the package database after each removal (as Salt's does).
drop-line:
  pkgrepo.absent:
    - name: deb http://127.0.0.1:9/brine-x/ bookworm main

drop-file:
  pkgrepo.absent:
    - name: deb http://127.0.0.1:9/brine-y bookworm main

lists:
  cmd.run:
    - name: for f in /etc/apt/sources.list.d/brine-test-*.list; do echo "== $f"; cat "$f"; done; rm -f /etc/apt/sources.list.d/brine-test-*.list
    - order: last
