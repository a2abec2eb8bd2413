{%- set kh = grains.work ~ '/known_hosts' %}
{%- set k1 = 'AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl' %}
new-host:
  ssh_known_hosts.present:
    - name: new.example
    - key: {{ k1 }}
    - enc: ssh-ed25519
    - config: {{ kh }}
    - hash_known_hosts: False

changed-key:
  ssh_known_hosts.present:
    - name: old.example
    - key: {{ k1 }}
    - enc: ssh-ed25519
    - config: {{ kh }}
    - hash_known_hosts: False

by-fingerprint:
  ssh_known_hosts.present:
    - name: new.example
    - fingerprint: f8:38:98:df:0b:ef:57:a4:ee:24:98:5b:a5:98:ac:17:fc:cb:0c:0d:33:3c:c4:af:1d:d9:2b:e1:4b:c2:3a:a5
    - config: {{ kh }}
    - hash_known_hosts: False

on-a-port:
  ssh_known_hosts.present:
    - name: port.example
    - key: {{ k1 }}
    - enc: ssh-ed25519
    - port: 2222
    - config: {{ kh }}
    - hash_known_hosts: False

port-and-hash:
  ssh_known_hosts.present:
    - name: port2.example
    - port: 2222
    - config: {{ kh }}

hashed:
  ssh_known_hosts.present:
    - name: hashed.example
    - key: {{ k1 }}
    - enc: ssh-ed25519
    - config: {{ grains.work }}/hashed_hosts

key-and-fingerprint:
  ssh_known_hosts.present:
    - name: both.example
    - key: {{ k1 }}
    - fingerprint: aa:bb
    - config: {{ kh }}
    - hash_known_hosts: False

relative-without-user:
  ssh_known_hosts.present:
    - name: rel.example
    - key: {{ k1 }}
    - enc: ssh-ed25519
    - config: known_hosts

gone:
  ssh_known_hosts.absent:
    - name: other.example
    - config: {{ kh }}

never-there:
  ssh_known_hosts.absent:
    - name: nobody.example
    - config: {{ kh }}

absent-relative:
  ssh_known_hosts.absent:
    - name: nobody.example
    - config: relative/known_hosts

show:
  cmd.run:
    - name: cat {{ kh }}; ls {{ grains.work }}
    - order: last
