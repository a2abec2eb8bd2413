brinetest_g5:
  group.present:
    - gid: 23505
    - addusers:
      - root

brinetest_u5:
  user.present:
    - uid: 23515
    - shell: /bin/sh
    - home: /tmp/brinetest_u5_home
    - fullname: Five
    - workphone: "555"
    - groups:
      - brinetest_g5
    - require:
      - group: brinetest_g5

brinetest_nouser:
  user.absent
