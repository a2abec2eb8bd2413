# A new user with a hash and every shadow attribute.
brinetest_s1:
  user.present:
    - uid: 23601
    - usergroup: False
    - gid: users
    - createhome: False
    - home: /tmp/brinetest_s1_home
    - password: '$6$abcdefgh$ltjgWl6579NluT/Vi1nwEvcil.G5Nbc4NiXZaNGStk8PSwGfQv72N2CKPPrVACtLtip/cZ/1GM/O6IND4WQhG.'
    - date: 19000
    - mindays: 1
    - maxdays: 90
    - inactdays: 10
    - warndays: 5
    - expire: 30000

# An existing user without a password: it gets one (the date of the change is today's),
# and new maximum and warning days.
brinetest_s2:
  user.present:
    - createhome: False
    - password: '$6$saltsalt$r4j7z8gOqxO9zYH/VSQ4MPgAu/GTg0.tIK5o0K3dXowoILt/JRmXmiqFa26mKioMH3Fwhg6qaU0XTibPpoJ8z.'
    - maxdays: 60
    - warndays: 3

# enforce_password: False keeps the password it has; the minimum days change.
brinetest_s3:
  user.present:
    - createhome: False
    - password: '$5$pepper$ttGNkPBZFADkD.QY7db.r1/szDTkao55qqvjJhQqca7'
    - enforce_password: False
    - mindays: 2
    - maxdays: 99999
    - date: 18500
    - expire: 25000

brinetest_s4:
  user.present:
    - createhome: False
    - empty_password: True

# The clear text of the hash it has, with its salt: nothing to change.
brinetest_s5:
  user.present:
    - createhome: False
    - password: secret
    - hash_password: True
    - date: 18000

brinetest_s6:
  user.present:
    - createhome: False
    - password_lock: True

# The password it has, other minimum days: changed, though Salt reports no change.
brinetest_s7:
  user.present:
    - createhome: False
    - password: '$6$abcdefgh$ltjgWl6579NluT/Vi1nwEvcil.G5Nbc4NiXZaNGStk8PSwGfQv72N2CKPPrVACtLtip/cZ/1GM/O6IND4WQhG.'
    - mindays: 4

# A new user with a clear text password hashed with a random salt, and no
# password to speak of on a second.
brinetest_s8:
  user.present:
    - uid: 23608
    - usergroup: False
    - gid: users
    - createhome: False
    - home: /tmp/brinetest_s8_home
    - password: clear
    - hash_password: True
    - mindays: 0
    - warndays: 6

brinetest_s9:
  user.present:
    - createhome: False
    - password_lock: False

# chage refuses the value: the state fails, naming it.
brinetest_s10:
  user.present:
    - createhome: False
    - mindays: many
    - warndays: 2
