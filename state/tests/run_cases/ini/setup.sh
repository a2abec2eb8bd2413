# The ini files of the case, in its work directory: comments (# and ;), blank lines, options
# before any section, a commented-out option, duplicate options and sections, a continued
# value, `=` and `:` separators and values with spaces.
w="$1"
cat > "$w/main.ini" <<'INI'
# Global settings
; written by hand
name = demo
path: /usr/local
#debug = true
spaced   =   a value with spaces

[server]
# the port
#port = 80
host = localhost
dup = first
dup = second
  continued line
timeout: 30

[client]
retries = 3

[server]
extra = merged
INI
printf 'top1 = a\ntop2 = b\n\n[keep]\nk1 = v1\nk2 = v2\n\n[drop]\nx = y\n' > "$w/strict.ini"
printf '[db]\nuser: admin\npass : secret\nport = 5432\n' > "$w/colon.ini"
printf '[s]\na = 1\nb=2\n' > "$w/nospace.ini"
printf 'a=1\n\n\n[s]\nb  :  2\n[t]\n' > "$w/normalize.ini"
printf 'lone = 1\n[only]\nlast = 1\n[multi]\na = 1\nb = 2\nempty =\n' > "$w/remove.ini"
printf '[a]\nx = 1\n[b]\n[c]\ny = 2\n' > "$w/sections.ini"
printf 'ok = 1\n' > "$w/errors.ini"
