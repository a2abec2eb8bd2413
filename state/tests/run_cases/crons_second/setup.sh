# Reset what any crons* case leaves behind: the test user exists, with this crontab.
id brinetest_cron >/dev/null 2>&1 || useradd -M -N -u 23540 -d /nonexistent -s /bin/sh brinetest_cron
crontab -u brinetest_cron - <<'TAB'
# Lines below here are managed by Salt, do not edit
EMPTYVAR=""
# SALT_CRON_IDENTIFIER:to_remove
0 0 * * * /bin/remove_me
TAB
