# A file with two managed zones for file.blockreplace.
printf 'top\n# -- start a --\nold a\n# -- end a --\nmiddle\n# -- start b --\n# -- end b --\n' > "$1/zones.conf"
