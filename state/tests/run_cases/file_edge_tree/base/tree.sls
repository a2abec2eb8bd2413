{% set work = grains.work %}
dir-mode-only:
  file.directory:
    - name: {{ work }}/plain_dir
    - mode: 755

dir-new-dirmode:
  file.directory:
    - name: {{ work }}/new/a/b
    - makedirs: True
    - dir_mode: 750

dir-trailing-slash:
  file.directory:
    - name: {{ work }}/plain_dir/

absent-dir:
  file.absent:
    - name: {{ work }}/absent_dir

absent-dir-again:
  file.absent:
    - name: {{ work }}/absent_dir

ren-move:
  file.rename:
    - name: {{ work }}/ren_dst
    - source: {{ work }}/ren_src

ren-already:
  file.rename:
    - name: {{ work }}/ren_dst
    - source: {{ work }}/ren_src

ren-taken:
  file.rename:
    - name: {{ work }}/ren_taken
    - source: {{ work }}/ren_src2

ren-force:
  file.rename:
    - name: {{ work }}/ren_forced
    - source: {{ work }}/ren_src3
    - force: True

ren-makedirs:
  file.rename:
    - name: {{ work }}/ren/deep/dir
    - source: {{ work }}/ren_dir
    - makedirs: True

ren-nodir:
  file.rename:
    - name: {{ work }}/ren_nodir/x
    - source: {{ work }}/ren_taken

ren-link:
  file.rename:
    - name: {{ work }}/ren_link2
    - source: {{ work }}/ren_link

ren-relative:
  file.rename:
    - name: relative/x
    - source: {{ work }}/ren_taken

cp-noforce:
  file.copy:
    - name: {{ work }}/cp_dst
    - source: {{ work }}/cp_src

cp-force-preserve:
  file.copy:
    - name: {{ work }}/cp_dst
    - source: {{ work }}/cp_src
    - force: True
    - preserve: True

dir-clean:
  file.directory:
    - name: {{ work }}/clean
    - clean: True
    - exclude_pat: 'E@^keep'

dir-recurse-mode:
  file.directory:
    - name: {{ work }}/rmode
    - file_mode: 644
    - dir_mode: 755
    - recurse:
      - mode

dir-recurse-silent:
  file.directory:
    - name: {{ work }}/rsilent
    - mode: 755
    - recurse: [mode, silent]

dir-recurse-ignore-files:
  file.directory:
    - name: {{ work }}/rign
    - dir_mode: 750
    - file_mode: 640
    - children_only: True
    - recurse: [mode, ignore_files]

dir-recurse-bad:
  file.directory:
    - name: {{ work }}/rign
    - recurse: [mode, nonsense]

dir-recurse-not-list:
  file.directory:
    - name: {{ work }}/rign
    - recurse: mode

dir-recurse-both-ignores:
  file.directory:
    - name: {{ work }}/rign
    - recurse: [ignore_files, ignore_dirs]

dir-recurse-no-user:
  file.directory:
    - name: {{ work }}/rign
    - recurse: [user]

dir-clean-depth:
  file.directory:
    - name: {{ work }}/rign
    - clean: True
    - max_depth: 1

keep-sub:
  file.directory:
    - name: {{ work }}/rclean2/keep_sub

dir-clean-required:
  file.directory:
    - name: {{ work }}/rclean2
    - clean: True
    - require:
      - file: {{ work }}/rclean2/keep_sub

dump:
  cmd.run:
    - name: cd {{ work }} && find . -printf '%p %y %m %l\n' | sort
    - order: last
