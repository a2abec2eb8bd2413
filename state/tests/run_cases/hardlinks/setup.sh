# Files to link to, a regular file and an older hard link where links go, a directory.
w="$1"
mkdir -p "$w/src" "$w/dst/adir"
printf 'one\n' > "$w/src/one"
printf 'two\n' > "$w/src/two"
printf 'in the way\n' > "$w/dst/regular"
printf 'in the way too\n' > "$w/dst/forced"
ln "$w/src/one" "$w/dst/same"
ln "$w/src/one" "$w/dst/moved"
