# Last of the crons* cases: the test user with a crontab, all of which is removed, then the
# user too, so nothing is left behind.
id brinetest_cron >/dev/null 2>&1 || useradd -M -N -u 23540 -d /nonexistent -s /bin/sh brinetest_cron
crontab -u brinetest_cron - <<'TAB'
# Lines below here are managed by Salt, do not edit
MAILTO=root
# SALT_CRON_IDENTIFIER:/bin/last
1 2 * * * /bin/last
@weekly /bin/weekly
TAB
