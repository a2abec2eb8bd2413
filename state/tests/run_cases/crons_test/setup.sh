# Reset what any crons* case leaves behind: the test user exists, with this crontab.
id brinetest_cron >/dev/null 2>&1 || useradd -M -N -u 23540 -d /nonexistent -s /bin/sh brinetest_cron
crontab -u brinetest_cron - <<'TAB'
# a line of the user's own
MAILTO=""
0 5 * * * /usr/bin/unmanaged
# Lines below here are managed by Salt, do not edit
SHELL=/bin/sh
EMPTYVAR=""
# old comment SALT_CRON_IDENTIFIER:job_by_id
5 4 * * * /bin/old_command
10 * * * * /bin/no_identifier
#DISABLED#@daily /bin/disabled_special
# SALT_CRON_IDENTIFIER:to_remove
0 0 * * * /bin/remove_me
@hourly /bin/hourly
# SALT_CRON_IDENTIFIER:/bin/unchanged
15 3 * * 1 /bin/unchanged
TAB
