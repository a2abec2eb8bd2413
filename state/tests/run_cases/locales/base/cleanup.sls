# The machine's locale files back as they were (setup.sh put them back), the copies gone.
drop-copies:
  cmd.run:
    - name: rm -rf /var/tmp/brine-test-locale
