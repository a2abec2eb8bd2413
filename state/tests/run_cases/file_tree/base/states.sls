{% set work = grains.work %}
# ---------------------------------------------------------------- symlink
link-new:
  file.symlink:
    - name: {{ work }}/link_new
    - target: {{ work }}/target_file
link-ok:
  file.symlink:
    - name: {{ work }}/link_ok
    - target: {{ work }}/target_file
link-wrong:
  file.symlink:
    - name: {{ work }}/link_wrong
    - target: {{ work }}/target_file
link-relative-target:
  file.symlink:
    - name: {{ work }}/link_rel
    - target: target_file
link-over-file:
  file.symlink:
    - name: {{ work }}/existing_file
    - target: {{ work }}/target_file
link-force-file:
  file.symlink:
    - name: {{ work }}/force_file
    - target: {{ work }}/target_file
    - force: True
link-force-dir:
  file.symlink:
    - name: {{ work }}/dir_in_way
    - target: {{ work }}/target_file
    - force: True
link-backup:
  file.symlink:
    - name: {{ work }}/backup_me
    - target: {{ work }}/target_file
    - backupname: backup_me.bak
link-backup-clash:
  file.symlink:
    - name: {{ work }}/backup_clash
    - target: {{ work }}/target_file
    - backupname: {{ work }}/backup_clash.bak
link-backup-bad:
  file.symlink:
    - name: {{ work }}/backup_clash
    - target: {{ work }}/target_file
    - backupname: sub/backup.bak
link-makedirs:
  file.symlink:
    - name: {{ work }}/mk/a/link
    - target: {{ work }}/target_file
    - makedirs: True
    - mode: 750
link-noparent:
  file.symlink:
    - name: {{ work }}/noparent/link
    - target: {{ work }}/target_file
link-relative-name:
  file.symlink:
    - name: relative/link
    - target: /tmp
link-owned:
  file.symlink:
    - name: {{ work }}/link_owned
    - target: {{ work }}/target_file
    - user: nobody
    - group: nogroup
link-rechown:
  file.symlink:
    - name: {{ work }}/link_ok
    - target: {{ work }}/target_file
    - user: nobody
    - require:
      - file: link-ok
link-bad-user:
  file.symlink:
    - name: {{ work }}/link_bad_user
    - target: {{ work }}/target_file
    - user: nosuchuser
    - group: nosuchgroup
link-atomic:
  file.symlink:
    - name: {{ work }}/atomic_file
    - target: {{ work }}/target_file
    - atomic: True
link-inherit:
  file.symlink:
    - name: {{ work }}/link_inherit
    - target: {{ work }}/target_file
    - inherit_user_and_group: True
link-dangling-nofollow:
  file.symlink:
    - name: {{ work }}/dangling
    - target: /nonexistent
    - follow_symlinks: False
# ---------------------------------------------------------------- copy
copy-force-over-dir:
  file.copy:
    - name: {{ work }}/copy_over_dir
    - source: {{ work }}/src.txt
    - force: True
copy-new:
  file.copy:
    - name: {{ work }}/copy_new
    - source: {{ work }}/src.txt
copy-exists:
  file.copy:
    - name: {{ work }}/copy_exists
    - source: {{ work }}/src.txt
copy-forced-identical:
  file.copy:
    - name: {{ work }}/copy_forced
    - source: {{ work }}/src.txt
    - force: True
copy-makedirs:
  file.copy:
    - name: {{ work }}/cdeep/a/copy
    - source: {{ work }}/src.txt
    - makedirs: True
copy-nodir:
  file.copy:
    - name: {{ work }}/cnodir/copy
    - source: {{ work }}/src.txt
copy-subdir:
  file.copy:
    - name: {{ work }}/cdir
    - source: {{ work }}/src.txt
    - subdir: True
copy-missing-source:
  file.copy:
    - name: {{ work }}/copy_missing
    - source: {{ work }}/nope
copy-mode-user:
  file.copy:
    - name: {{ work }}/copy_mode
    - source: {{ work }}/src.txt
    - mode: 600
    - user: nobody
copy-dir:
  file.copy:
    - name: {{ work }}/copy_dir
    - source: {{ work }}/srcdir
    - group: nogroup
copy-preserve:
  file.copy:
    - name: {{ work }}/copy_preserve
    - source: {{ work }}/owned_src
    - preserve: True
copy-relative:
  file.copy:
    - name: relative/copy
    - source: {{ work }}/src.txt
copy-bad-user:
  file.copy:
    - name: {{ work }}/copy_bad_user
    - source: {{ work }}/src.txt
    - user: nosuchuser
# ---------------------------------------------------------------- recurse
rec-new:
  file.recurse:
    - name: {{ work }}/rec_new
    - source: salt://tree
rec-options:
  file.recurse:
    - name: {{ work }}/rec_opts
    - source: salt://tree/
    - template: jinja
    - defaults:
        greeting: hello
        who: nobody
    - context:
        who: everyone
    - file_mode: 600
    - dir_mode: 750
    - exclude_pat: '*.log'
    - user: nobody
    - group: nogroup
rec-clean:
  file.recurse:
    - name: {{ work }}/rec_clean
    - source: salt://tree
    - clean: True
    - exclude_pat: 'keep*'
rec-depth:
  file.recurse:
    - name: {{ work }}/rec_depth
    - source: salt://deep
    - maxdepth: 1
rec-include:
  file.recurse:
    - name: {{ work }}/rec_include
    - source: salt://tree
    - include_pat: E@\.txt$
rec-links:
  file.recurse:
    - name: {{ work }}/rec_links
    - source: salt://tree
    - keep_symlinks: True
    - include_pat:
      - link*
      - top.txt
rec-empty:
  file.recurse:
    - name: {{ work }}/rec_empty
    - source: salt://tree
    - include_empty: True
    - exclude_pat: E@inner|link|conf|log
rec-exist:
  file.recurse:
    - name: {{ work }}/rec_exist
    - source: salt://tree
    - include_pat: E@txt$
rec-missing:
  file.recurse:
    - name: {{ work }}/rec_missing
    - source: salt://nope
rec-source-is-file:
  file.recurse:
    - name: {{ work }}/rec_file_source
    - source: salt://tree/top.txt
rec-invalid-source:
  file.recurse:
    - name: {{ work }}/rec_invalid
    - source: /srv/tree
rec-mode:
  file.recurse:
    - name: {{ work }}/rec_mode
    - source: salt://tree
    - mode: 644
rec-name-is-file:
  file.recurse:
    - name: {{ work }}/rec_is_file
    - source: salt://tree
rec-source-list:
  file.recurse:
    - name: {{ work }}/rec_list
    - source:
      - salt://nope
      - salt://deep/a/b
rec-noreplace:
  file.recurse:
    - name: {{ work }}/rec_noreplace
    - source: salt://tree
    - include_pat: top.txt
    - replace: False
rec-linked-keep:
  file.recurse:
    - name: {{ work }}/rec_linked_keep
    - source: salt://linked
    - keep_symlinks: True
rec-linked-follow:
  file.recurse:
    - name: {{ work }}/rec_linked_follow
    - source: salt://linked
# ---------------------------------------------------------------- serialize
ser-encoding:
  file.serialize:
    - name: {{ work }}/ser_enc.yaml
    - encoding: utf-8
    - dataset: {u: héllo}
ser-yaml:
  file.serialize:
    - name: {{ work }}/ser.yaml
    - dataset:
        name: naive
        list: [1, 2.5, 'yes', null, true]
        nested:
          key: value
          empty: {}
        unicode: héllo
        multi: "one\ntwo"
ser-json:
  file.serialize:
    - name: {{ work }}/ser.json
    - serializer: json
    - dataset:
        name: naive
        list: [1, 2.5, 'yes', null, true]
        nested:
          key: value
        unicode: héllo
ser-json-opts:
  file.serialize:
    - name: {{ work }}/ser_opts.json
    - formatter: JSON
    - serializer_opts:
      - indent: 4
      - sort_keys: False
    - dataset:
        z: 1
        a: [1, 2]
ser-yaml-opts:
  file.serialize:
    - name: {{ work }}/ser_opts.yaml
    - serializer_opts:
      - explicit_start: True
      - indent: 4
    - dataset:
        z:
          - a: 1
            b: 2
        a: x
ser-merge:
  file.serialize:
    - name: {{ work }}/merge.json
    - serializer: json
    - merge_if_exists: True
    - dataset:
        nested:
          y: 2
        b: new
ser-merge-same:
  file.serialize:
    - name: {{ work }}/merge_same.yaml
    - merge_if_exists: True
    - dataset:
        a: 1
ser-bad:
  file.serialize:
    - name: {{ work }}/ser_bad
    - serializer: bogus
    - dataset: {a: 1}
ser-both:
  file.serialize:
    - name: {{ work }}/ser_both
    - serializer: json
    - formatter: yaml
    - dataset: {a: 1}
ser-none:
  file.serialize:
    - name: {{ work }}/ser_none
ser-pillar:
  file.serialize:
    - name: {{ work }}/ser_pillar.yaml
    - dataset_pillar: no:such:key
ser-noshow:
  file.serialize:
    - name: {{ work }}/ser_noshow.yaml
    - show_changes: False
    - dataset: {a: 1}
ser-nocreate:
  file.serialize:
    - name: {{ work }}/ser_nocreate.yaml
    - create: False
    - dataset: {a: 1}
ser-makedirs-mode:
  file.serialize:
    - name: {{ work }}/ser/deep/data.json
    - serializer: json
    - makedirs: True
    - mode: 640
    - user: nobody
    - dataset: [1, 2]
ser-same:
  file.serialize:
    - name: {{ work }}/ser_same.json
    - serializer: json
    - dataset: {k: v}
ser-deserializer-opts:
  file.serialize:
    - name: {{ work }}/ser_deser.yaml
    - deserializer_opts:
      - encoding: latin-1
    - dataset: {a: 1}
# ---------------------------------------------------------------- what is on disk
on-disk:
  cmd.run:
    - name: |
        cd {{ work }} && find . -path ./.cache -prune -o -printf '%p %y %m %u:%g %l\n' | sort
        for f in $(find . -path ./.cache -prune -o -type f -print | sort); do echo "== $f"; cat "$f"; done
    - order: last
