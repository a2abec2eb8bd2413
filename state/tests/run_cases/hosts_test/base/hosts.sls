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

second_comment:
  host.present:
    - name: beta
    - ip: 10.0.0.2
    - comment: second

commented:
  host.present:
    - ip: 10.0.0.60
    - comment: a note

alpha_elsewhere:
  host.present:
    - name: alpha
    - ip: 10.0.0.3

gone:
  host.present:
    - ip: 10.0.0.10
    - clean: True

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

mixed:
  host.absent:
    - name: alpha
    - ip:
      - 10.0.0.77
      - 10.0.0.1

192.168.5.5:
  host.only:
    - hostnames:
      - onlyme
      - new1

127.0.0.1:
  host.only:
    - hostnames: localhost
