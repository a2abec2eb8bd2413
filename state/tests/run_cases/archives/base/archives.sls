{% set work = grains.work %}
tar_gz:
  archive.extracted:
    - name: {{ work }}/out_tgz
    - source: {{ work }}/app.tar.gz

tar_xz_trimmed:
  archive.extracted:
    - name: {{ work }}/out_txz/
    - source: file://{{ work }}/app.tar.xz
    - trim_output: 2

zip_plain:
  archive.extracted:
    - name: {{ work }}/out_zip
    - source: {{ work }}/app.zip

from_master:
  archive.extracted:
    - name: {{ work }}/out_master
    - source: salt://arch/small.tar.gz
    - keep_source: False

missing_on_master:
  archive.extracted:
    - name: {{ work }}/out_nomaster
    - source: salt://arch/nope.tar.gz

bomb:
  archive.extracted:
    - name: {{ work }}/out_bomb
    - source: {{ work }}/bomb.tar

bomb_allowed:
  archive.extracted:
    - name: {{ work }}/out_bomb_ok
    - source: {{ work }}/bomb.tar
    - enforce_toplevel: False

with_tar_options:
  archive.extracted:
    - name: {{ work }}/out_opts
    - source: {{ work }}/app.tar.gz
    - options: --strip-components=1
    - enforce_toplevel: False

already_there:
  archive.extracted:
    - name: {{ work }}/out_if_missing
    - source: {{ work }}/app.tar.gz
    - if_missing: {{ work }}/present/marker

relative_name:
  archive.extracted:
    - name: out_relative
    - source: {{ work }}/app.tar.gz

no_such_source:
  archive.extracted:
    - name: {{ work }}/out_none
    - source: {{ work }}/nope.tar.gz

unknown_format:
  archive.extracted:
    - name: {{ work }}/out_unknown
    - source: {{ work }}/data.bin

bad_format:
  archive.extracted:
    - name: {{ work }}/out_bad
    - source: {{ work }}/data.bin
    - archive_format: 7z

not_a_tar:
  archive.extracted:
    - name: {{ work }}/out_plain
    - source: {{ work }}/plain.tar

good_hash:
  archive.extracted:
    - name: {{ work }}/out_hash
    - source: salt://arch/small.tar.gz
    - source_hash: 15ca17c32080f11826a14f421839c27f9ac10421eef1e1b951fd125db47e1642

hash_from_file:
  archive.extracted:
    - name: {{ work }}/out_hash_file
    - source: salt://arch/small.tar.gz
    - source_hash: salt://arch/SHA256SUMS

hash_not_a_hash:
  archive.extracted:
    - name: {{ work }}/out_hash_bad
    - source: {{ work }}/app.tar.gz
    - source_hash: xyz

hash_file_missing:
  archive.extracted:
    - name: {{ work }}/out_hash_missing
    - source: {{ work }}/app.tar.gz
    - source_hash: salt://arch/NOSUMS

wrong_hash:
  archive.extracted:
    - name: {{ work }}/out_badhash
    - source: {{ work }}/app.tar.gz
    - source_hash: md5=0123456789abcdef0123456789abcdef

wrong_type:
  archive.extracted:
    - name: {{ work }}/wrongtype
    - source: {{ work }}/app.tar.gz

clean_and_overwrite:
  archive.extracted:
    - name: {{ work }}/out_clean
    - source: {{ work }}/app.zip
    - clean: True
    - overwrite: True

zip_with_options:
  archive.extracted:
    - name: {{ work }}/out_zipopts
    - source: {{ work }}/app.zip
    - options: -o

owned:
  archive.extracted:
    - name: {{ work }}/out_owned
    - source: {{ work }}/app.tar.gz
    - user: root
    - group: root

no_such_user:
  archive.extracted:
    - name: {{ work }}/out_nouser
    - source: {{ work }}/app.tar.gz
    - user: brine-no-such-user
