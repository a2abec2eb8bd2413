brinetest_s1:
  user.absent

brinetest_s2:
  user.absent
