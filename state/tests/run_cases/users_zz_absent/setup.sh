# Remove what any users* case leaves behind (errors ignored: most of it is absent).
for u in brinetest_u1 brinetest_u2 brinetest_u3 brinetest_u4 brinetest_u5 brinetest_u6 brinetest_u7 brinetest_u9; do
  userdel -r "$u" >/dev/null 2>&1
done
for g in brinetest_g1 brinetest_g2 brinetest_g3 brinetest_g5 brinetest_g6 brinetest_g8 brinetest_g9 brinetest_u1 brinetest_u2 brinetest_u3 brinetest_u5 brinetest_u9; do
  groupdel "$g" >/dev/null 2>&1
done
rm -rf /tmp/brinetest_u1_home /tmp/brinetest_u2_home /tmp/brinetest_u3_home /tmp/brinetest_u5_home /tmp/brinetest_u6_home /tmp/brinetest_u9_home
# Last of the users* cases: u9 (with its own group) and g9 exist, and are removed, so
# nothing is left behind.
groupadd -g 23509 brinetest_g9
useradd -m -U -u 23519 -d /tmp/brinetest_u9_home brinetest_u9
gpasswd -a brinetest_u9 brinetest_g9 >/dev/null
