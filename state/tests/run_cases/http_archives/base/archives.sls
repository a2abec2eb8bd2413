{% set work = grains.work %}
{% set http = grains.http %}
{% set host = http.split('//')[1].replace(':', '') %}
{% set cache = work ~ '/.cache/extrn_files/base/' ~ host %}
{% set good = '78a9b46a780d28f945ddbe1658df2e7b25c8272dcd51a88ddfae9ae63ec67ba4' %}
{% set zero = '0000000000000000000000000000000000000000000000000000000000000000' %}

# An archive over http, its hash given.
extract:
  archive.extracted:
    - name: {{ work }}/x
    - source: {{ http }}/a.tar.gz
    - source_hash: sha256={{ good }}
# No hash, no skip_verify.
no_hash:
  archive.extracted:
    - name: {{ work }}/no_hash
    - source: {{ http }}/a.tar.gz
# A wrong hash: the download stays cached.
wrong_hash:
  archive.extracted:
    - name: {{ work }}/wrong_hash
    - source: {{ http }}/a.tar.gz?wrong=1
    - source_hash: sha256={{ zero }}
# Not on the server.
missing:
  archive.extracted:
    - name: {{ work }}/missing
    - source: {{ http }}/missing.tar.gz
    - source_hash: {{ good }}
# No hash: the server's ETag decides whether it is fetched again.
use_etag:
  archive.extracted:
    - name: {{ work }}/use_etag
    - source: {{ http }}/a.tar.gz?etag=1
    - use_etag: True
# The same source again: the server answers 304 to the cached copy's ETag.
use_etag_again:
  archive.extracted:
    - name: {{ work }}/use_etag_again
    - source: {{ http }}/a.tar.gz?etag=1
    - use_etag: True
    - require:
      - archive: use_etag
# Not verified.
skip_verify:
  archive.extracted:
    - name: {{ work }}/skip_verify
    - source: {{ http }}/a.tar.gz?skip=1
    - skip_verify: True
# The cached archive deleted afterwards.
keep_source:
  archive.extracted:
    - name: {{ work }}/keep_source
    - source: {{ http }}/a.tar.gz?keep=0
    - source_hash: {{ good }}
    - keep_source: False
keep_source_gone:
  cmd.run:
    - name: test ! -e {{ cache }}/a.tar.gz-keep=0 && test -f {{ cache }}/a.tar.gz && test -f {{ work }}/x/top/a.txt
    - require:
      - archive: keep_source
# Credentials in the URL stay out of the comments.
credentials:
  archive.extracted:
    - name: {{ work }}/credentials
    - source: {{ http.replace('//', '//user:s3cret@') }}/a.tar.gz?cred=1
    - source_hash: sha256={{ good }}
