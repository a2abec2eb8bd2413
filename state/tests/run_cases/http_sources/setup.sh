# Files in place for http(s) sources; the test's HTTP server serves tests/http_files/.
mkdir -p "$1/out"
printf 'hello from http\n' > "$1/out/same"
printf 'old\n' > "$1/out/differs"
printf 'old\n' > "$1/out/bad_in_place"
printf 'hello from http\n' > "$1/out/same_by_url"
# Copies already in the cache of URLs the server does not have: used when their hash fits
# (or skip_verify is set), which a download would not give.
host=$(printf '%s' "$BRINE_HTTP" | sed 's#^http://##; s#:##g')
mkdir -p "$1/.cache/extrn_files/base/$host"
printf 'from cache\n' > "$1/.cache/extrn_files/base/$host/cached.txt"
printf 'from cache\n' > "$1/.cache/extrn_files/base/$host/skip_cached.txt"
printf 'stale\n' > "$1/.cache/extrn_files/base/$host/a.txt"
printf 'first line\n' > "$1/out/append"
