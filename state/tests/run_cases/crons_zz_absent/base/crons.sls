/bin/last:
  cron.absent:
    - user: brinetest_cron

/bin/weekly:
  cron.absent:
    - user: brinetest_cron
    - special: '@weekly'

MAILTO:
  cron.env_absent:
    - user: brinetest_cron

dump:
  cmd.run:
    - name: crontab -u brinetest_cron -l

remove_crontab:
  cmd.run:
    - name: crontab -u brinetest_cron -r

brinetest_cron:
  user.absent: []
