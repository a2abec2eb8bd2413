/bin/random_job:
  cron.present:
    - user: brinetest_cron
    - minute: random
    - hour: random
    - daymonth: random

/bin/range_job:
  cron.present:
    - user: brinetest_cron
    - minute: 0
    - hour: '1:5'

/bin/plain:
  cron.present:
    - user: brinetest_cron
    - minute: 30
    - comment: kept

/bin/off:
  cron.present:
    - user: brinetest_cron
    - commented: True

/bin/boot:
  cron.present:
    - user: brinetest_cron
    - special: '@reboot'

EMPTYVAR:
  cron.env_present:
    - user: brinetest_cron

PATH:
  cron.env_present:
    - user: brinetest_cron
    - value: /usr/bin:/bin

remove_by_id:
  cron.absent:
    - name: /bin/remove_me
    - user: brinetest_cron
    - identifier: to_remove

dump:
  cmd.run:
    - name: crontab -u brinetest_cron -l | grep -v -e random_job -e range_job
