{% set work = grains.work %}

# file.append
app-text:
  file.append:
    - name: {{ work }}/app.txt
    - text: line three

app-list:
  file.append:
    - name: {{ work }}/app.txt
    - text:
      - line one
      - "line    two"
      - line four

app-regex-text:
  file.append:
    - name: {{ work }}/app.txt
    - text: line f.ur
    - ignore_whitespace: False

app-nonl:
  file.append:
    - name: {{ work }}/app_nonl.txt
    - text: next

app-makedirs:
  file.append:
    - name: {{ work }}/new/deep/file.txt
    - text: hello
    - makedirs: True

app-nodir:
  file.append:
    - name: {{ work }}/nodir/file.txt
    - text: x

app-relative:
  file.append:
    - name: relative.txt
    - text: x

app-source:
  file.append:
    - name: {{ work }}/app.txt
    - source: salt://edit/add.txt
    - context:
        greeting: hello

app-source-missing:
  file.append:
    - name: {{ work }}/app.txt
    - source: salt://edit/nope.txt

app-both-sources:
  file.append:
    - name: {{ work }}/app.txt
    - source: salt://edit/add.txt
    - sources:
      - salt://edit/add.txt

app-no-text:
  file.append:
    - name: {{ work }}/app_nonl.txt

app-quoted:
  file.append:
    - name: {{ work }}/app.txt
    - text: say "hello   world" it's fine

# file.prepend
pre-text:
  file.prepend:
    - name: {{ work }}/pre.txt
    - text:
      - first
      - second

pre-present:
  file.prepend:
    - name: {{ work }}/pre.txt
    - text: "  first  "

pre-header:
  file.prepend:
    - name: {{ work }}/pre.txt
    - header: True
    - text:
      - first
      - second

pre-crlf:
  file.prepend:
    - name: {{ work }}/crlf.txt
    - text: zero

pre-new:
  file.prepend:
    - name: {{ work }}/pre_new.txt
    - text: created

# file.comment / file.uncomment
com-host:
  file.comment:
    - name: {{ work }}/comment.conf
    - regex: ^host

com-again:
  file.comment:
    - name: {{ work }}/comment.conf
    - regex: ^host

com-indented:
  file.comment:
    - name: {{ work }}/comment.conf
    - regex: port = 80$

com-char:
  file.comment:
    - name: {{ work }}/comment.conf
    - regex: ^name=
    - char: ';'
    - backup: False

com-ignore:
  file.comment:
    - name: {{ work }}/comment.conf
    - regex: nothere
    - ignore_missing: True

com-notfound:
  file.comment:
    - name: {{ work }}/comment.conf
    - regex: nothere

com-nofile:
  file.comment:
    - name: {{ work }}/none.conf
    - regex: x

unc-host:
  file.uncomment:
    - name: {{ work }}/comment.conf
    - regex: host = a

unc-name:
  file.uncomment:
    - name: {{ work }}/comment.conf
    - regex: ^name
    - char: ';'

unc-already:
  file.uncomment:
    - name: {{ work }}/comment.conf
    - regex: host = a

unc-missing:
  file.uncomment:
    - name: {{ work }}/comment.conf
    - regex: zzz

# file.replace
rep-root:
  file.replace:
    - name: {{ work }}/sshd
    - pattern: ^PermitRootLogin .*
    - repl: PermitRootLogin no

rep-append:
  file.replace:
    - name: {{ work }}/sshd
    - pattern: ^UseDNS .*
    - repl: UseDNS no
    - append_if_not_found: True

rep-same:
  file.replace:
    - name: {{ work }}/sshd
    - pattern: ^Port 22$
    - repl: Port 22

rep-prepend:
  file.replace:
    - name: {{ work }}/sshd
    - pattern: ^# managed
    - repl: '# managed by salt'
    - prepend_if_not_found: True
    - backup: False
    - show_changes: False

rep-flags:
  file.replace:
    - name: {{ work }}/sshd
    - pattern: ^PORT (\d+)
    - repl: Port \1
    - flags:
      - IGNORECASE
      - MULTILINE
    - backup: .orig

rep-count:
  file.replace:
    - name: {{ work }}/count.txt
    - pattern: foo
    - repl: bar
    - count: 2

rep-missing:
  file.replace:
    - name: {{ work }}/none
    - pattern: a
    - repl: b

rep-missing-ignored:
  file.replace:
    - name: {{ work }}/none
    - pattern: a
    - repl: b
    - ignore_if_missing: True

rep-no-repl:
  file.replace:
    - name: {{ work }}/sshd
    - pattern: a

# file.blockreplace
blk-replace:
  file.blockreplace:
    - name: {{ work }}/block.txt
    - content: |
        new one
        new two

blk-same:
  file.blockreplace:
    - name: {{ work }}/block.txt
    - content: |
        new one
        new two

blk-append:
  file.blockreplace:
    - name: {{ work }}/block2.txt
    - marker_start: '# BEGIN'
    - marker_end: '# END'
    - content: x = 1
    - append_if_not_found: True

blk-prepend:
  file.blockreplace:
    - name: {{ work }}/block2.txt
    - marker_start: '<<<'
    - marker_end: '>>>'
    - content: p = 1
    - prepend_if_not_found: True
    - backup: False

blk-insert:
  file.blockreplace:
    - name: {{ work }}/block2.txt
    - marker_start: '# INS'
    - marker_end: '# /INS'
    - content: inserted
    - insert_after_match: ^top
    - show_changes: False

blk-source:
  file.blockreplace:
    - name: {{ work }}/block2.txt
    - marker_start: '# SRC'
    - marker_end: '# /SRC'
    - source: salt://edit/block.jinja
    - context:
        who: brine
        value: 42
    - append_if_not_found: True
    - append_newline: False

blk-crlf:
  file.blockreplace:
    - name: {{ work }}/block_crlf.txt
    - content: in the middle
    - insert_before_match: ^last

blk-no-markers:
  file.blockreplace:
    - name: {{ work }}/block2.txt
    - marker_start: '# NONE'
    - marker_end: '# /NONE'
    - content: x

blk-bad-regex:
  file.blockreplace:
    - name: {{ work }}/block2.txt
    - marker_start: '# NONE'
    - marker_end: '# /NONE'
    - content: x
    - insert_before_match: '*bad'

blk-exclusive:
  file.blockreplace:
    - name: {{ work }}/block2.txt
    - content: x
    - append_if_not_found: True
    - prepend_if_not_found: True

blk-missing:
  file.blockreplace:
    - name: {{ work }}/none
    - content: x

# file.line
line-ensure:
  file.line:
    - name: {{ work }}/line.txt
    - content: after alpha
    - mode: ensure
    - after: ^alpha

line-ensure-again:
  file.line:
    - name: {{ work }}/line.txt
    - content: after alpha
    - mode: ensure
    - after: ^alpha

line-replace:
  file.line:
    - name: {{ work }}/line.txt
    - content: BETA
    - match: beta
    - mode: replace

line-delete:
  file.line:
    - name: {{ work }}/line.txt
    - match: gamma
    - mode: delete

line-start:
  file.line:
    - name: {{ work }}/line.txt
    - content: at the start
    - mode: Insert
    - location: start

line-between:
  file.line:
    - name: {{ work }}/line.txt
    - content: between
    - mode: insert
    - after: BETA
    - before: delta
    - indent: False

line-end-noshow:
  file.line:
    - name: {{ work }}/line.txt
    - content: at the end
    - mode: insert
    - location: end
    - show_changes: False
    - file_mode: '0600'

line-create:
  file.line:
    - name: {{ work }}/line_new.txt
    - content: created
    - mode: insert
    - location: start
    - create: True

line-nocreate:
  file.line:
    - name: {{ work }}/line_none.txt
    - content: x
    - mode: insert
    - location: start

line-nomode:
  file.line:
    - name: {{ work }}/line.txt
    - content: x

line-nocontent:
  file.line:
    - name: {{ work }}/line.txt
    - mode: ensure
    - after: alpha

line-relative:
  file.line:
    - name: rel/line.txt
    - content: x
    - mode: ensure

# file.keyvalue
kv-set:
  file.keyvalue:
    - name: {{ work }}/kv.conf
    - key_values:
        a: 2
        b: five
    - uncomment: '#'

kv-count:
  file.keyvalue:
    - name: {{ work }}/kv.conf
    - key: c
    - value: '9'

kv-case:
  file.keyvalue:
    - name: {{ work }}/kv.conf
    - key: d
    - value: X
    - key_ignore_case: True
    - value_ignore_case: True

kv-append:
  file.keyvalue:
    - name: {{ work }}/kv.conf
    - key_values:
        e: 1
        f: 'yes'
    - append_if_not_found: True

kv-prepend:
  file.keyvalue:
    - name: {{ work }}/kv.conf
    - key: top
    - value: 'true'
    - prepend_if_not_found: True
    - show_changes: False

kv-whitespace:
  file.keyvalue:
    - name: {{ work }}/kv_ws.conf
    - key: key
    - value: new
    - separator: ' = '

kv-all:
  file.keyvalue:
    - name: {{ work }}/kv.conf
    - key: c
    - value: '10'
    - count: -1

kv-missing:
  file.keyvalue:
    - name: {{ work }}/none.conf
    - key: a
    - value: b

kv-missing-ignored:
  file.keyvalue:
    - name: {{ work }}/none.conf
    - key: a
    - value: b
    - ignore_if_missing: True

kv-create:
  file.keyvalue:
    - name: {{ work }}/kv_new.conf
    - key: a
    - value: b
    - create_if_missing: True

kv-empty:
  file.keyvalue:
    - name: {{ work }}/kv.conf

kv-not-dict:
  file.keyvalue:
    - name: {{ work }}/kv.conf
    - key_values:
      - a

kv-combined:
  file.keyvalue:
    - name: {{ work }}/kv.conf
    - key: a
    - value: b
    - key_values:
        a: b

com-slash:
  file.comment:
    - name: {{ work }}/slash.conf
    - regex: x = 1
    - char: //

com-slash-indented:
  file.comment:
    - name: {{ work }}/slash.conf
    - regex: ^y
    - char: //

blk-end-prefix:
  file.blockreplace:
    - name: {{ work }}/block_end.txt
    - content: new

rep-backslash:
  file.replace:
    - name: {{ work }}/win.txt
    - pattern: ^path=.*
    - repl: path=C:\new\dir
    - backslash_literal: True
    - flags: 8

line-ensure-before:
  file.line:
    - name: {{ work }}/line.txt
    - content: ahead of d
    - mode: ensure
    - before: ^delta

pre-sources:
  file.prepend:
    - name: {{ work }}/pre.txt
    - sources:
      - salt://edit/add.txt
    - defaults:
        greeting: hi

kv-crlf-count:
  file.keyvalue:
    - name: {{ work }}/kv_crlf.conf
    - key: K
    - value: 7
    - count: 2
    - key_ignore_case: True
    - uncomment: '#'

blk-list-content:
  file.blockreplace:
    - name: {{ work }}/block3.txt
    - content:
      - a
      - b
    - append_if_not_found: True

blk-append-newline:
  file.blockreplace:
    - name: {{ work }}/block3.txt
    - content: managed
    - append_if_not_found: True
    - append_newline: True

unc-nobackup:
  file.uncomment:
    - name: {{ work }}/uncomment.conf
    - regex: ^opt
    - backup: False

rep-not-found-content:
  file.replace:
    - name: {{ work }}/uncomment.conf
    - pattern: ^(opt) = (\d+)
    - repl: \1 = \2\2
    - not_found_content: never used

rep-not-found-append:
  file.replace:
    - name: {{ work }}/uncomment.conf
    - pattern: ^extra = .*
    - repl: ignored
    - not_found_content: extra = 1
    - append_if_not_found: True

# What the files hold afterwards, with their modes.
dump:
  cmd.run:
    - name: cd {{ work }} && for f in $(find . -path ./.cache -prune -o -type f -print | sort); do echo "== $f $(stat -c %a $f)"; cat -A $f; echo; done
