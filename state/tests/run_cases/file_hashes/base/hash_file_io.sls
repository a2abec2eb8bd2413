# Under test=True Salt's own run fails on this one with a traceback, so it is only run for real.
hash_file_missing:
  file.managed:
    - name: {{ grains.work }}/out/hash_file_missing
    - source: {{ grains.work }}/src.txt
    - source_hash: {{ grains.work }}/nope
