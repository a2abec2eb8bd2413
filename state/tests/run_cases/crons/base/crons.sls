/bin/new_job --flag:
  cron.present:
    - user: brinetest_cron
    - minute: 7
    - hour: 2
    - comment: |
        first line
        second line

same_job_again:
  cron.present:
    - name: /bin/new_job --flag
    - user: brinetest_cron
    - minute: 7
    - hour: 2
    - comment: |
        first line
        second line

/bin/new_command:
  cron.present:
    - user: brinetest_cron
    - identifier: job_by_id
    - minute: 5
    - hour: 4

/bin/no_identifier:
  cron.present:
    - user: brinetest_cron
    - minute: 10

/bin/disabled_special:
  cron.present:
    - user: brinetest_cron
    - special: '@daily'

/bin/on_reboot:
  cron.present:
    - user: brinetest_cron
    - special: '@reboot'
    - commented: True

/bin/unchanged:
  cron.present:
    - user: brinetest_cron
    - minute: 15
    - hour: 3
    - dayweek: 1

"  /bin/spaced  ":
  cron.present:
    - user: brinetest_cron
    - minute: '*/5'
    - dayweek: MON

remove_by_id:
  cron.absent:
    - name: /bin/whatever
    - user: brinetest_cron
    - identifier: to_remove

/bin/never_there:
  cron.absent:
    - user: brinetest_cron

/bin/hourly:
  cron.absent:
    - user: brinetest_cron
    - special: '@hourly'

MAILTO:
  cron.env_present:
    - user: brinetest_cron
    - value: root@example.com

SHELL:
  cron.env_present:
    - user: brinetest_cron
    - value: /bin/sh

EMPTYVAR:
  cron.env_present:
    - user: brinetest_cron

remove_shell:
  cron.env_absent:
    - name: SHELL
    - user: brinetest_cron

NOPE:
  cron.env_absent:
    - user: brinetest_cron

/bin/for_a_ghost:
  cron.present:
    - user: brinetest_nocron_ghost

GHOSTVAR:
  cron.env_absent:
    - user: brinetest_nocron_ghost

/bin/ghost_absent:
  cron.absent:
    - user: brinetest_nocron_ghost

dump:
  cmd.run:
    - name: crontab -u brinetest_cron -l
