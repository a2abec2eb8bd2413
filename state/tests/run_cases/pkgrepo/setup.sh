# APT source lists of the test's own (/etc/apt/sources.list.d/brine-test-*.list, their
# repositories on a loopback port nothing listens on), made anew: one with a comment, a
# repository, a disabled one and a blank line; one with a stray line for clean_file.
rm -f /etc/apt/sources.list.d/brine-test-*.list
printf '# kept as it is\ndeb http://127.0.0.1:9/brine-old/ bookworm main\n#deb-src  http://127.0.0.1:9/brine-old bookworm main # sources\n\ndeb [arch=amd64 trusted=yes] http://127.0.0.1:9/brine-same stable main\n' > /etc/apt/sources.list.d/brine-test-old.list
printf 'deb http://127.0.0.1:9/brine-stray stable main\ndeb http://127.0.0.1:9/brine-c bookworm main\n' > /etc/apt/sources.list.d/brine-test-c.list
