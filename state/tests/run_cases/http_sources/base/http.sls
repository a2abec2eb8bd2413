{% set work = grains.work %}
{% set http = grains.http %}
{% set host = http.split('//')[1].replace(':', '') %}
{% set cache = work ~ '/.cache/extrn_files/base/' ~ host %}
{% set good = '9347bf9e5b6f42fa181ab19631e9011b836363d3a08b05a8faf318868be5882e' %}
{% set zero = '0000000000000000000000000000000000000000000000000000000000000000' %}

# A new file, its hash given.
new_file:
  file.managed:
    - name: {{ work }}/out/new_file
    - source: {{ http }}/a.txt
    - source_hash: sha256={{ good }}
# A file in place that has the hash already: nothing is downloaded (its cache stays absent).
same:
  file.managed:
    - name: {{ work }}/out/same
    - source: {{ http }}/a.txt?same=1
    - source_hash: {{ good }}
same_not_downloaded:
  cmd.run:
    - name: test ! -e {{ cache }}/a.txt-same=1
    - require:
      - file: same
# A file in place that differs.
differs:
  file.managed:
    - name: {{ work }}/out/differs
    - source: {{ http }}/a.txt
    - source_hash: sha256={{ good }}
# No hash, no skip_verify.
no_hash:
  file.managed:
    - name: {{ work }}/out/no_hash
    - source: {{ http }}/a.txt
no_hash_credentials:
  file.managed:
    - name: {{ work }}/out/no_hash_credentials
    - source: {{ http.replace('//', '//user:s3cret@') }}/a.txt
# Not on the server.
missing:
  file.managed:
    - name: {{ work }}/out/missing
    - source: {{ http }}/missing.txt
    - source_hash: {{ good }}
missing_credentials:
  file.managed:
    - name: {{ work }}/out/missing_credentials
    - source: {{ http.replace('//', '//user:s3cret@') }}/missing.txt?x=1
    - source_hash: {{ good }}
# A wrong hash, the file absent, then in place.
bad_hash:
  file.managed:
    - name: {{ work }}/out/bad_hash
    - source: {{ http }}/a.txt?bad=1
    - source_hash: sha256={{ zero }}
bad_in_place:
  file.managed:
    - name: {{ work }}/out/bad_in_place
    - source: {{ http }}/a.txt?bad=2
    - source_hash: sha256={{ zero }}
# The hash from a hash file over http.
hash_url:
  file.managed:
    - name: {{ work }}/out/hash_url
    - source: {{ http }}/a.txt
    - source_hash: {{ http }}/a.txt.sha256
same_by_url:
  file.managed:
    - name: {{ work }}/out/same_by_url
    - source: {{ http }}/a.txt
    - source_hash: {{ http }}/a.txt.sha256
hash_url_cached:
  cmd.run:
    - name: test -f {{ cache }}/a.txt.sha256
    - require:
      - file: hash_url
# No verification.
skip_verify:
  file.managed:
    - name: {{ work }}/out/skip_verify
    - source: {{ http }}/a.txt?skip=1
    - skip_verify: True
# The cached copy deleted afterwards.
keep_source:
  file.managed:
    - name: {{ work }}/out/keep_source
    - source: {{ http }}/a.txt?keep=0
    - source_hash: {{ good }}
    - keep_source: False
keep_source_gone:
  cmd.run:
    - name: test ! -e {{ cache }}/a.txt-keep=0 && test -f {{ cache }}/a.txt
    - require:
      - file: keep_source
# A list whose first URL is not there; through a redirect.
source_list:
  file.managed:
    - name: {{ work }}/out/source_list
    - source:
      - {{ http }}/missing.txt
      - {{ http }}/redirect/a.txt
    - source_hash: {{ good }}
source_list_none:
  file.managed:
    - name: {{ work }}/out/source_list_none
    - source:
      - {{ http }}/missing.txt
      - {{ http }}/missing2.txt
    - source_hash: {{ good }}
redirect_cached:
  cmd.run:
    - name: test -f {{ cache }}/redirect/a.txt
    - require:
      - file: source_list
# Copies in the cache (see setup.sh): reused when their hash fits or skip_verify is set,
# fetched again when it does not (a.txt holds something else there).
cache_reused:
  file.managed:
    - name: {{ work }}/out/cache_reused
    - source: {{ http }}/cached.txt
    - source_hash: 106c10aec411cc6863a5d988f4ab9704f4f1b4fe6a85258de45640a22f6a4831
skip_verify_cached:
  file.managed:
    - name: {{ work }}/out/skip_verify_cached
    - source: {{ http }}/skip_cached.txt
    - skip_verify: True
# A script over http.
script:
  cmd.script:
    - name: {{ http }}/s.sh
    - args: one
# ETags instead of a hash: stored beside the cached copy, a 304 keeps it.
etag:
  file.managed:
    - name: {{ work }}/out/etag
    - source: {{ http }}/a.txt?etag=1
    - use_etag: True
etag_stored:
  cmd.run:
    - name: test -f {{ cache }}/a.txt-etag=1.etag
    - require:
      - file: etag
# A list of one that is not there.
source_list_one:
  file.managed:
    - name: {{ work }}/out/source_list_one
    - source:
      - {{ http }}/missing.txt
    - source_hash: {{ good }}
# A template over http for file.append.
append:
  file.append:
    - name: {{ work }}/out/append
    - source: {{ http }}/a.txt?append=1
