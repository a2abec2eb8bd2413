# A local source, hash files naming it, and files already in place.
printf 'hello\n' > "$1/src.txt"
printf 'other\n' > "$1/other.txt"
mkdir -p "$1/out"
# md5 of 'hello\n' for src.txt, a wrong one for other.txt, then a sha256 line.
printf 'b1946ac92492d2347c6235b4d2611184  src.txt\n00000000000000000000000000000000  other.txt\n' > "$1/md5sums"
printf 'no hash in here\n' > "$1/nohash"
printf '5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03 *%s/src.txt\n' "$1" > "$1/sha256sums"
printf 'X  unrelated\n1111111111111111111111111111111111111111111111111111111111111111  first.bin\n5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03  named\n' > "$1/named_sums"
# In place: one that already holds the source, one that does not, one whose hash is trusted.
printf 'hello\n' > "$1/out/same"
printf 'old\n' > "$1/out/differs"
printf 'old\n' > "$1/out/trusted"
printf 'old\n' > "$1/out/backed_up"
chmod 640 "$1/out/backed_up"
