brinetest_u7:
  user.present:
    - uid: 23517
    - groups:
      - brinetest_g6
      - brinetest_g7_pending

brinetest_u6:
  user.present:
    - shell: /bin/bash
    - fullname: Six
    - groups:
      - brinetest_g6

u6_same:
  user.present:
    - name: brinetest_u6
    - createhome: False
    - shell: /bin/sh

u6_gone:
  user.absent:
    - name: brinetest_u6

brinetest_g6:
  group.present:
    - gid: 23507
    - members:
      - root

brinetest_g8:
  group.present:
    - gid: 23508

g6_gone:
  group.absent:
    - name: brinetest_g6

brinetest_g3:
  group.absent
