brinetest_g1:
  group.present:
    - gid: 23501
    - members:
      - brinetest_u3

brinetest_u1:
  user.present:
    - uid: 23511
    - shell: /bin/sh
    - home: /tmp/brinetest_u1_home
    - fullname: Brine Test
    - groups:
      - brinetest_g1

brinetest_u3:
  user.present:
    - shell: /bin/bash
    - fullname: Three
    - roomnumber: 12
    - groups:
      - brinetest_g1
    - optional_groups:
      - brinetest_nosuchgroup

u3_uid:
  user.present:
    - name: brinetest_u3
    - uid: 23599

g1_members:
  group.present:
    - name: brinetest_g1
    - addusers:
      - root
    - delusers:
      - brinetest_u3
      - daemon

brinetest_u4:
  user.present:
    - groups:
      - brinetest_nosuchgroup

bad_gecos:
  user.present:
    - name: brinetest_u4
    - fullname: a,b

conflict:
  group.present:
    - name: brinetest_g1
    - members: [root]
    - addusers: [root]

brinetest_u2:
  user.absent:
    - purge: True

brinetest_g2:
  group.absent

brinetest_g3:
  group.absent

brinetest_nouser:
  user.absent
