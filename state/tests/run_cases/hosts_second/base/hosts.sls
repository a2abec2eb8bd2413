web:
  host.present:
    - ip: 10.0.0.20
    - comment: the web server

alpha:
  host.present:
    - ip: 10.0.0.1
    - comment: first

stale:
  host.present:
    - ip: 10.0.0.30
    - clean: True

10.0.0.40:
  host.only:
    - hostnames:
      - db
      - db.example.com

gone:
  host.absent:
    - ip: 10.0.0.1

dump:
  cmd.run:
    - name: cat {{ grains.work }}/hosts
