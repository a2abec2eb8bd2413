# Archives built in the work dir: one top-level directory each, a bomb, a zip, an xz tar.
set -e
src="$1/src"
mkdir -p "$src/app/conf" "$src/bomb"
printf 'one\n' > "$src/app/a.txt"
printf 'two\n' > "$src/app/conf/b.conf"
ln -s a.txt "$src/app/link"
printf 'x\n' > "$src/bomb/x.txt"
printf 'y\n' > "$src/bomb/y.txt"
(cd "$src" && tar -czf "$1/app.tar.gz" app && tar -cJf "$1/app.tar.xz" app \
  && tar -cf "$1/bomb.tar" -C bomb x.txt y.txt && zip -qry "$1/app.zip" app)
printf 'not an archive\n' > "$1/plain.tar"
printf 'data\n' > "$1/data.bin"
mkdir -p "$1/present"
touch "$1/present/marker"
# A path of the archive that exists with the wrong type.
mkdir -p "$1/wrongtype/app"
printf 'dir here\n' > "$1/wrongtype/app/a.txt.keep"
mkdir -p "$1/wrongtype/app/a.txt"
