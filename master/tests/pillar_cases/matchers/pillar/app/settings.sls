app:
  name: overridden-by-init
  threads: 4
