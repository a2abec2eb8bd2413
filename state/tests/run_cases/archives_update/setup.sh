# Two versions of one archive and their bare sha256 files; the states swap them in on the
# second run (when `marker` exists) to see source_hash_update extract again.
set -e
mkdir -p "$1/v1/app" "$1/v2/app"
printf 'one\n' > "$1/v1/app/a.txt"
printf 'two\n' > "$1/v2/app/a.txt"
(cd "$1/v1" && tar -czf "$1/app.tar.gz" app)
(cd "$1/v2" && tar -czf "$1/app2.tar.gz" app)
cp "$1/app.tar.gz" "$1/noupd.tar.gz"
sha256sum "$1/app.tar.gz" | cut -d' ' -f1 > "$1/app.sha"
sha256sum "$1/app2.tar.gz" | cut -d' ' -f1 > "$1/app2.sha"
