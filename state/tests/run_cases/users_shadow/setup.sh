# Remove what any users_shadow* case leaves behind (errors ignored: most of it is absent).
for u in brinetest_s1 brinetest_s2 brinetest_s3 brinetest_s4 brinetest_s5 brinetest_s6 brinetest_s7 brinetest_s8 brinetest_s9 brinetest_s10; do
  userdel -r "$u" >/dev/null 2>&1
done
for g in brinetest_s1 brinetest_s2 brinetest_s3 brinetest_s4 brinetest_s5 brinetest_s6 brinetest_s7 brinetest_s8 brinetest_s9 brinetest_s10; do
  groupdel "$g" >/dev/null 2>&1
done
rm -rf /tmp/brinetest_s1_home /tmp/brinetest_s8_home
# Existing users, without home directories; 'secret', 'other' and 'third' are the clear
# texts of the hashes. s2: no password yet; s3, s5, s7: sha512 hashes; s4: a password to
# empty; s6: a password to lock; s9: a locked sha256 hash to unlock; s10: for a
# value chage refuses.
H_SECRET='$6$abcdefgh$ltjgWl6579NluT/Vi1nwEvcil.G5Nbc4NiXZaNGStk8PSwGfQv72N2CKPPrVACtLtip/cZ/1GM/O6IND4WQhG.'
H_OTHER='$6$saltsalt$r4j7z8gOqxO9zYH/VSQ4MPgAu/GTg0.tIK5o0K3dXowoILt/JRmXmiqFa26mKioMH3Fwhg6qaU0XTibPpoJ8z.'
H_THIRD='$5$pepper$ttGNkPBZFADkD.QY7db.r1/szDTkao55qqvjJhQqca7'
useradd -M -N -g users -u 23602 -d /tmp/brinetest_s2_home brinetest_s2
useradd -M -N -g users -u 23603 -d /tmp/brinetest_s3_home -p "$H_OTHER" brinetest_s3
useradd -M -N -g users -u 23604 -d /tmp/brinetest_s4_home -p "$H_OTHER" brinetest_s4
useradd -M -N -g users -u 23605 -d /tmp/brinetest_s5_home -p "$H_SECRET" brinetest_s5
useradd -M -N -g users -u 23606 -d /tmp/brinetest_s6_home -p "$H_OTHER" brinetest_s6
useradd -M -N -g users -u 23607 -d /tmp/brinetest_s7_home -p "$H_SECRET" brinetest_s7
useradd -M -N -g users -u 23609 -d /tmp/brinetest_s9_home -p "!$H_THIRD" brinetest_s9
chage -d 18000 -m 0 -M 99999 -W 7 brinetest_s3
chage -d 18000 brinetest_s5
useradd -M -N -g users -u 23610 -d /tmp/brinetest_s10_home brinetest_s10
chage -d 18000 -m 0 brinetest_s7
