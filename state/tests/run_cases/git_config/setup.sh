# A repository with a key already set and a multi-valued one.
git init -q "$1/repo"
git -C "$1/repo" config brine.kept same
git -C "$1/repo" config --add brine.many one
git -C "$1/repo" config --add brine.many two
