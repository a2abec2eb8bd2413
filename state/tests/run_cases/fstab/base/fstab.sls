# mount.set_fstab's refusals (a bad match_on, a missing file) are exceptions in Salt's
# states, compared through salt-call in e2e/tests/salt_call.rs instead.
{%- set f = grains.work ~ '/fstab' %}
same-data:
  mount.fstab_present:
    - name: /dev/sdb1
    - fs_file: /data/
    - fs_vfstype: ext4
    - fs_mntops: noatime,defaults
    - fs_passno: 2
    - config: {{ f }}
    - mount: False

changed-data-options:
  mount.fstab_present:
    - name: /dev/sdb1
    - fs_file: /data
    - fs_vfstype: ext4
    - fs_mntops:
      - defaults
      - nodev
    - config: {{ f }}
    - mount: False

tmpfs-by-mount-point:
  mount.fstab_present:
    - name: tmpfs
    - fs_file: /run/cache
    - fs_vfstype: tmpfs
    - fs_mntops: size=20m
    - config: {{ f }}
    - mount: False

new-entry:
  mount.fstab_present:
    - name: /dev/sdd1
    - fs_file: /backup
    - fs_vfstype: ext4
    - fs_freq: 1
    - config: {{ f }}
    - mount: False

kept-as-is:
  mount.fstab_present:
    - name: /dev/sdc1
    - fs_file: /old
    - fs_vfstype: ext4
    - config: {{ f }}
    - not_change: True
    - mount: False

matched-on-name:
  mount.fstab_present:
    - name: /dev/sde1
    - fs_file: /old
    - fs_vfstype: xfs
    - config: {{ f }}
    - match_on: name
    - mount: False

already-uuid:
  mount.fstab_present:
    - name: UUID=1111-2222
    - fs_file: /
    - fs_vfstype: ext4
    - fs_mntops: errors=remount-ro
    - fs_passno: 1
    - mount_by: uuid
    - config: {{ f }}
    - mount: False

mounted-too:
  mount.fstab_present:
    - name: /dev/brine-test-none
    - fs_file: {{ grains.work }}/mnt
    - fs_vfstype: brinefs
    - config: {{ f }}

gone:
  mount.fstab_absent:
    - name: /dev/sdc1
    - fs_file: /old
    - config: {{ f }}

gone-already:
  mount.fstab_absent:
    - name: /dev/sdz1
    - fs_file: /nothing
    - config: {{ f }}

show:
  cmd.run:
    - name: cat {{ f }}
    - order: last
