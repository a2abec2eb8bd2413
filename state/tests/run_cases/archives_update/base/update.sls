{% set work = grains.work %}
swap:
  cmd.run:
    - name: cp {{ work }}/app2.tar.gz {{ work }}/app.tar.gz && cp {{ work }}/app2.sha {{ work }}/app.sha && cp {{ work }}/app2.tar.gz {{ work }}/noupd.tar.gz
    - onlyif: test -e {{ work }}/marker

updated:
  archive.extracted:
    - name: {{ work }}/out_upd
    - source: {{ work }}/app.tar.gz
    - source_hash: {{ work }}/app.sha
    - source_hash_update: True
    - require:
      - cmd: swap

not_updated:
  archive.extracted:
    - name: {{ work }}/out_noupd
    - source: {{ work }}/noupd.tar.gz
    - skip_verify: True
    - require:
      - cmd: swap

update_without_hash:
  archive.extracted:
    - name: {{ work }}/out_nohash
    - source: {{ work }}/app.tar.gz
    - source_hash_update: True
    - skip_verify: True
    - require:
      - cmd: swap

contents:
  cmd.run:
    - name: cat {{ work }}/out_upd/app/a.txt {{ work }}/out_noupd/app/a.txt
    - require:
      - archive: updated
      - archive: not_updated

marker:
  file.touch:
    - name: {{ work }}/marker
    - require:
      - cmd: contents
