{% set work = grains.work %}
{% set src = work ~ '/src.txt' %}
{% set good = '5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03' %}
{% set zero = '0000000000000000000000000000000000000000000000000000000000000000' %}

# Hash expressions.
typed_good:
  file.managed:
    - name: {{ work }}/out/typed_good
    - source: {{ src }}
    - source_hash: sha256={{ good }}
typed_upper:
  file.managed:
    - name: {{ work }}/out/typed_upper
    - source: {{ src }}
    - source_hash: md5=B1946AC92492D2347C6235B4D2611184
bare_md5:
  file.managed:
    - name: {{ work }}/out/bare_md5
    - source: file://{{ src }}
    - source_hash: b1946ac92492d2347c6235b4d2611184
typed_bad:
  file.managed:
    - name: {{ work }}/out/typed_bad
    - source: {{ src }}
    - source_hash: sha256={{ zero }}
typed_bad_makedirs:
  file.managed:
    - name: {{ work }}/out/new/dir/typed_bad
    - source: {{ src }}
    - makedirs: true
    - source_hash: sha256={{ zero }}
bad_form:
  file.managed:
    - name: {{ work }}/out/bad_form
    - source: {{ src }}
    - source_hash: xyz
bad_length:
  file.managed:
    - name: {{ work }}/out/bad_length
    - source: {{ src }}
    - source_hash: abcdef
bad_type:
  file.managed:
    - name: {{ work }}/out/bad_type
    - source: {{ src }}
    - source_hash: sha3=abc
wrong_length_for_type:
  file.managed:
    - name: {{ work }}/out/wrong_length_for_type
    - source: {{ src }}
    - source_hash: sha256=b1946ac92492d2347c6235b4d2611184
type_not_hex:
  file.managed:
    - name: {{ work }}/out/type_not_hex
    - source: {{ src }}
    - source_hash: md5=zz946ac92492d2347c6235b4d2611184
odd_scheme:
  file.managed:
    - name: {{ work }}/out/odd_scheme
    - source: {{ src }}
    - source_hash: "foo://bar"
skipped:
  file.managed:
    - name: {{ work }}/out/skipped
    - source: {{ src }}
    - source_hash: sha256={{ zero }}
    - skip_verify: true

# Hash files.
from_md5sums:
  file.managed:
    - name: {{ work }}/out/src.txt
    - source: {{ src }}
    - source_hash: {{ work }}/md5sums
md5sums_by_name:
  file.managed:
    - name: {{ work }}/out/other.txt
    - source: {{ src }}
    - source_hash: file://{{ work }}/md5sums
by_source_hash_name:
  file.managed:
    - name: {{ work }}/out/by_source_hash_name
    - source: {{ src }}
    - source_hash: {{ work }}/named_sums
    - source_hash_name: named
first_hash_in_file:
  file.managed:
    - name: {{ work }}/out/first_hash_in_file
    - source: {{ src }}
    - source_hash: {{ work }}/named_sums
full_path_line:
  file.managed:
    - name: {{ work }}/out/full_path_line
    - source: {{ src }}
    - source_hash: {{ work }}/sha256sums
from_master:
  file.managed:
    - name: {{ work }}/out/from_master
    - source: {{ src }}
    - source_hash: salt://sums
master_hash_missing:
  file.managed:
    - name: {{ work }}/out/master_hash_missing
    - source: {{ src }}
    - source_hash: salt://nope
no_hash_in_file:
  file.managed:
    - name: {{ work }}/out/no_hash_in_file
    - source: {{ src }}
    - source_hash: {{ work }}/nohash

# Files in place.
same:
  file.managed:
    - name: {{ work }}/out/same
    - source: {{ src }}
    - source_hash: sha256={{ good }}
differs:
  file.managed:
    - name: {{ work }}/out/differs
    - source: {{ src }}
    - source_hash: sha256={{ zero }}
trusted:
  file.managed:
    - name: {{ work }}/out/trusted
    - source: {{ src }}
    # The hash of what is in place: the file is left as it is.
    - source_hash: md5=814fa5ca98406a903e22b43d9b610105

# A salt:// source ignores source_hash; a template's hash is the rendered file's.
salt_source:
  file.managed:
    - name: {{ work }}/out/salt_source
    - source: salt://hello.txt
    - source_hash: sha256={{ zero }}
templated:
  file.managed:
    - name: {{ work }}/out/templated
    - source: {{ src }}
    - template: jinja
    - source_hash: sha256={{ zero }}
templated_bad_form:
  file.managed:
    - name: {{ work }}/out/templated_bad_form
    - source: {{ src }}
    - template: jinja
    - source_hash: xyz
contents_ignore_hash:
  file.managed:
    - name: {{ work }}/out/contents_ignore_hash
    - contents: hi
    - source_hash: xyz
# Backups.
backed_up:
  file.managed:
    - name: {{ work }}/out/backed_up
    - source: salt://hello.txt
    - backup: minion
backups_listed:
  cmd.run:
    - name: cd {{ work }}/.cache/file_backup && find . -type f | sed 's/_[A-Z][a-z][a-z]_.*//; s#.*/##' && stat -c '%a' $(find . -type f)
    - require:
      - file: backed_up
