# Under test=True (or with the file in place) Salt's own run fails on this one with a
# traceback, so it is only run for real with the file absent.
hash_url_missing:
  file.managed:
    - name: {{ grains.work }}/out/hash_url_missing
    - source: {{ grains.http }}/a.txt
    - source_hash: {{ grains.http }}/nohash.sha256
