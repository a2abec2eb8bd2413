brinetest_u9:
  user.absent:
    - purge: True
    - force: True

brinetest_g9:
  group.absent
