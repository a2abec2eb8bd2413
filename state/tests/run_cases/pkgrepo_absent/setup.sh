# Two source lists of the test's own: removing a repository from the first leaves its other
# lines, removing the only repository of the second removes the file.
rm -f /etc/apt/sources.list.d/brine-test-*.list
printf '# kept\ndeb http://127.0.0.1:9/brine-x/ bookworm main\n' > /etc/apt/sources.list.d/brine-test-x.list
printf 'deb http://127.0.0.1:9/brine-y bookworm main\n' > /etc/apt/sources.list.d/brine-test-y.list
