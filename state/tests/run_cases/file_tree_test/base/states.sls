{% set work = grains.work %}
link-new:
  file.symlink:
    - name: {{ work }}/link_new
    - target: {{ work }}/target_file
link-ok:
  file.symlink:
    - name: {{ work }}/link_ok
    - target: {{ work }}/target_file
link-ok-other-owner:
  file.symlink:
    - name: {{ work }}/link_ok
    - target: {{ work }}/target_file
    - user: nobody
link-wrong:
  file.symlink:
    - name: {{ work }}/link_wrong
    - target: {{ work }}/target_file
link-over-file:
  file.symlink:
    - name: {{ work }}/existing_file
    - target: {{ work }}/target_file
link-over-file-backup:
  file.symlink:
    - name: {{ work }}/existing_file
    - target: {{ work }}/target_file
    - backupname: existing_file.bak
link-force-dir:
  file.symlink:
    - name: {{ work }}/dir_in_way
    - target: {{ work }}/target_file
    - force: True
link-makedirs:
  file.symlink:
    - name: {{ work }}/mk/a/link
    - target: {{ work }}/target_file
    - makedirs: True
link-noparent:
  file.symlink:
    - name: {{ work }}/noparent/link
    - target: {{ work }}/target_file
copy-new:
  file.copy:
    - name: {{ work }}/copy_new
    - source: {{ work }}/src.txt
copy-exists:
  file.copy:
    - name: {{ work }}/copy_exists
    - source: {{ work }}/src.txt
copy-forced:
  file.copy:
    - name: {{ work }}/copy_exists
    - source: {{ work }}/src.txt
    - force: True
copy-subdir:
  file.copy:
    - name: {{ work }}/cdir
    - source: {{ work }}/src.txt
    - subdir: True
copy-bad-user-in-test:
  file.copy:
    - name: {{ work }}/copy_bad_user
    - source: {{ work }}/src.txt
    - user: nosuchuser
copy-missing-source:
  file.copy:
    - name: {{ work }}/copy_missing
    - source: {{ work }}/nope
rec-exist:
  file.recurse:
    - name: {{ work }}/rec_exist
    - source: salt://tree
    - include_pat: E@txt$
rec-new-single:
  file.recurse:
    - name: {{ work }}/rec_single
    - source: salt://deep/a/b
rec-links:
  file.recurse:
    - name: {{ work }}/rec_links
    - source: salt://tree
    - keep_symlinks: True
    - include_pat: link*
rec-clean:
  file.recurse:
    - name: {{ work }}/rec_clean
    - source: salt://tree
    - clean: True
    - exclude_pat: 'keep*'
rec-dir-mode:
  file.recurse:
    - name: {{ work }}/rec_perm
    - source: salt://tree
    - include_pat: E@^sub
    - dir_mode: 755
rec-unchanged:
  file.recurse:
    - name: {{ work }}/rec_exist
    - source: salt://tree
    - include_pat: top.txt
rec-missing:
  file.recurse:
    - name: {{ work }}/rec_missing
    - source: salt://nope
ser-new:
  file.serialize:
    - name: {{ work }}/ser.yaml
    - dataset: {a: [1, 2]}
ser-new-noshow:
  file.serialize:
    - name: {{ work }}/ser_new_noshow.yaml
    - show_changes: False
    - dataset: {a: 1}
ser-noshow:
  file.serialize:
    - name: {{ work }}/ser_noshow.yaml
    - show_changes: False
    - dataset: {a: 1}
ser-same:
  file.serialize:
    - name: {{ work }}/ser_same.json
    - serializer: json
    - dataset: {k: v}
ser-mode:
  file.serialize:
    - name: {{ work }}/ser_mode.yaml
    - mode: 600
    - dataset: {a: 1}
ser-merge:
  file.serialize:
    - name: {{ work }}/merge.json
    - serializer: json
    - merge_if_exists: True
    - dataset:
        nested:
          y: 2
ser-bad:
  file.serialize:
    - name: {{ work }}/ser_bad
    - serializer: bogus
    - dataset: {a: 1}
