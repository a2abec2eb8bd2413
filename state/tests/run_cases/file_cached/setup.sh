printf 'local file\n' > "$1/local.txt"
