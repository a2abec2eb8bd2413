newhost:
  host.present:
    - ip: 10.0.0.50

alpha:
  host.present:
    - ip: 10.0.0.1

beta:
  host.present:
    - ip: 10.0.0.2
    - comment: changed

gamma:
  host.present:
    - ip:
      - 10.0.0.1

alpha_elsewhere:
  host.present:
    - name: alpha
    - ip: 10.0.0.3

gone:
  host.present:
    - ip: 10.0.0.10
    - clean: True

commented:
  host.present:
    - ip: 10.0.0.60
    - comment: a note

v6host:
  host.present:
    - ip: 'fe80::1'

other:
  host.present:
    - ip: badaddr

beta_gone:
  host.absent:
    - name: beta
    - ip: 10.0.0.2

nothere:
  host.absent:
    - ip: 10.0.0.2

alpha2:
  host.absent:
    - ip:
      - 10.0.0.77
      - 10.0.0.1

192.168.5.5:
  host.only:
    - hostnames:
      - onlyme
      - ' new1 '

127.0.0.1:
  host.only:
    - hostnames: localhost

10.0.0.99:
  host.only:
    - hostnames: []

127.0.1.1:
  host.only:
    - hostnames: []

dump:
  cmd.run:
    - name: cat {{ grains.work }}/hosts
