/bin/new_job:
  cron.present:
    - user: brinetest_cron
    - minute: 7

/bin/unchanged:
  cron.present:
    - user: brinetest_cron
    - minute: 15
    - hour: 3
    - dayweek: 1

unchanged_but_commented:
  cron.present:
    - name: /bin/unchanged
    - user: brinetest_cron
    - minute: 15
    - hour: 3
    - dayweek: 1
    - commented: True

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

change_shell:
  cron.env_present:
    - name: SHELL
    - user: brinetest_cron
    - value: /bin/bash

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
