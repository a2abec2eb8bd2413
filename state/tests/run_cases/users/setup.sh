# Remove what any users* case leaves behind (errors ignored: most of it is absent).
for u in brinetest_u1 brinetest_u2 brinetest_u3 brinetest_u4 brinetest_u5 brinetest_u6 brinetest_u7 brinetest_u9; do
  userdel -r "$u" >/dev/null 2>&1
done
for g in brinetest_g1 brinetest_g2 brinetest_g3 brinetest_g5 brinetest_g6 brinetest_g8 brinetest_g9 brinetest_u1 brinetest_u2 brinetest_u3 brinetest_u5 brinetest_u9; do
  groupdel "$g" >/dev/null 2>&1
done
rm -rf /tmp/brinetest_u1_home /tmp/brinetest_u2_home /tmp/brinetest_u3_home /tmp/brinetest_u5_home /tmp/brinetest_u6_home /tmp/brinetest_u9_home
# u2 and g2 exist to be removed; u3 exists (no home directory) to be changed.
groupadd -g 23502 brinetest_g2
useradd -m -U -u 23512 -d /tmp/brinetest_u2_home -s /bin/sh brinetest_u2
useradd -M -N -g users -u 23513 -d /tmp/brinetest_u3_home -s /bin/sh brinetest_u3
