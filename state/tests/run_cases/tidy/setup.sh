# Trees to tidy and prune: old and new files (ten days old by access, change is now), a big
# one, links, nested directories, empty ones.
w="$1"
old() { touch -a -m -d '10 days ago' "$@"; }
for t in t1 t2 t3 t4 t5; do
  mkdir -p "$w/$t/sub/deeper" "$w/$t/empty"
  printf 'old\n' > "$w/$t/old.log"; old "$w/$t/old.log"
  printf 'new\n' > "$w/$t/new.log"
  printf 'keep\n' > "$w/$t/keep.log"; old "$w/$t/keep.log"
  head -c 2000 /dev/zero > "$w/$t/big.bin"
  printf 'x\n' > "$w/$t/sub/old.txt"; old "$w/$t/sub/old.txt"
  printf 'y\n' > "$w/$t/sub/deeper/new.txt"
  ln -s old.log "$w/$t/link.log"
  old "$w/$t/empty" "$w/$t/sub/deeper"
done
mkdir -p "$w/p1/a/b/c" "$w/p1/d" "$w/p2" "$w/p3/x" "$w/p4/e/f" "$w/p4/g"
printf 'x\n' > "$w/p3/x/file"
printf 'x\n' > "$w/p4/g/file"
