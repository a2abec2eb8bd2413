# Last of the users_shadow* cases: s1 exists (with a password) and is removed, and the
# others are gone (errors ignored), so nothing is left behind.
for u in brinetest_s1 brinetest_s2 brinetest_s3 brinetest_s4 brinetest_s5 brinetest_s6 brinetest_s7 brinetest_s8 brinetest_s9 brinetest_s10; do
  userdel -r "$u" >/dev/null 2>&1
done
for g in brinetest_s1 brinetest_s2 brinetest_s3 brinetest_s4 brinetest_s5 brinetest_s6 brinetest_s7 brinetest_s8 brinetest_s9 brinetest_s10; do
  groupdel "$g" >/dev/null 2>&1
done
rm -rf /tmp/brinetest_s1_home /tmp/brinetest_s8_home
useradd -M -N -g users -u 23601 -d /tmp/brinetest_s1_home -p '$5$pepper$ttGNkPBZFADkD.QY7db.r1/szDTkao55qqvjJhQqca7' brinetest_s1
