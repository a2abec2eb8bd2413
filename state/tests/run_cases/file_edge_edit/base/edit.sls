{% set work = grains.work %}
line-replace-indent:
  file.line:
    - name: {{ work }}/nginx.conf
    - match: listen
    - content: listen 8080;
    - mode: replace

line-insert-after-indent:
  file.line:
    - name: {{ work }}/nginx.conf
    - after: root
    - content: index index.html;
    - mode: insert

line-insert-before-noindent:
  file.line:
    - name: {{ work }}/nginx.conf
    - before: '^}'
    - content: 'gzip on;'
    - mode: insert
    - indent: False

line-delete-missing:
  file.line:
    - name: {{ work }}/nginx.conf
    - match: nothere
    - mode: delete

line-insert-end:
  file.line:
    - name: {{ work }}/abc.txt
    - content: z
    - mode: insert
    - location: end

line-insert-start-present:
  file.line:
    - name: {{ work }}/abc.txt
    - content: a
    - mode: insert
    - location: start

line-replace-nomatch:
  file.line:
    - name: {{ work }}/abc.txt
    - match: nothere
    - content: q
    - mode: replace

rep-count-flags:
  file.replace:
    - name: {{ work }}/count.txt
    - pattern: '^X=(\d)'
    - repl: 'x=\g<1>0'
    - count: 2
    - flags: [IGNORECASE, MULTILINE]

rep-prepend-nf:
  file.replace:
    - name: {{ work }}/count.txt
    - pattern: '^# header$'
    - repl: '# header'
    - prepend_if_not_found: True

rep-nf-content-append:
  file.replace:
    - name: {{ work }}/count.txt
    - pattern: '^y=.*'
    - repl: 'y=9'
    - not_found_content: 'y=0'
    - append_if_not_found: True

blk-change-noshow:
  file.blockreplace:
    - name: {{ work }}/block.txt
    - marker_start: '# BEGIN'
    - marker_end: '# END'
    - content: new
    - show_changes: False

blk-append-new-markers:
  file.blockreplace:
    - name: {{ work }}/block.txt
    - marker_start: '## start'
    - marker_end: '## end'
    - content: |
        l1
        l2
    - append_if_not_found: True

kv-sep-uncomment:
  file.keyvalue:
    - name: {{ work }}/kv.conf
    - separator: ': '
    - uncomment: ';'
    - key_values:
        key2: v9
        KEY1: v1
    - key_ignore_case: True

kv-sep-append:
  file.keyvalue:
    - name: {{ work }}/kv.conf
    - separator: ': '
    - key: Key3
    - value: v3
    - append_if_not_found: True

com-backup:
  file.comment:
    - name: {{ work }}/com.txt
    - regex: ^opt1
    - char: '% '
    - backup: .bak

unc-char:
  file.uncomment:
    - name: {{ work }}/com.txt
    - regex: opt1
    - char: '% '

dump:
  cmd.run:
    - name: cd {{ work }} && for f in $(find . -type f | sort); do echo "== $f $(stat -c %a $f)"; cat -A $f; done
    - order: last
