{% set work = grains.work %}
master_file:
  file.cached:
    - name: salt://files/data.txt

master_file_hash_ok:
  file.cached:
    - name: salt://files/data.txt
    - source_hash: sha256=4cd5559617dade36e3b66a36f9c8259f115ba323110c38cd2c878c6691c3caf8

master_missing:
  file.cached:
    - name: salt://files/missing.txt

bad_hash_expression:
  file.cached:
    - name: salt://files/data.txt
    - source_hash: nothex

http_without_hash:
  file.cached:
    - name: {{ grains.http }}/a.txt

http_with_hash:
  file.cached:
    - name: {{ grains.http }}/a.txt
    - source_hash: 9347bf9e5b6f42fa181ab19631e9011b836363d3a08b05a8faf318868be5882e

http_with_hash_file:
  file.cached:
    - name: {{ grains.http }}/a.txt
    - source_hash: {{ grains.http }}/a.txt.sha256

http_skip_verify:
  file.cached:
    - name: {{ grains.http }}/s.sh
    - skip_verify: True

http_wrong_hash:
  file.cached:
    - name: {{ grains.http }}/a.tar.gz
    - source_hash: md5=0123456789abcdef0123456789abcdef

http_missing:
  file.cached:
    - name: {{ grains.http }}/nothing.txt
    - skip_verify: True

local_present:
  file.cached:
    - name: {{ work }}/local.txt

local_wrong_hash:
  file.cached:
    - name: file://{{ work }}/local.txt
    - source_hash: sha256=0000000000000000000000000000000000000000000000000000000000000000

local_missing:
  file.cached:
    - name: {{ work }}/nothing

signed:
  file.cached:
    - name: {{ grains.http }}/a.txt
    - source_hash: 9347bf9e5b6f42fa181ab19631e9011b836363d3a08b05a8faf318868be5882e
    - signed_by_any: ABCDEF
    - source_hash_sig: True

uncache_master:
  file.not_cached:
    - name: salt://files/data.txt
    - require:
      - file: master_file_hash_ok

uncache_again:
  file.not_cached:
    - name: salt://files/data.txt
    - require:
      - file: uncache_master

uncache_http:
  file.not_cached:
    - name: {{ grains.http }}/s.sh
    - require:
      - file: http_skip_verify

uncache_local:
  file.not_cached:
    - name: {{ work }}/local.txt
