{% set work = grains.work %}
{{ work }}/conf:
  file.directory:
    - mode: 750

{{ work }}/conf/motd:
  file.managed:
    - source: salt://app/motd.jinja
    - template: jinja
    - defaults:
        greeting: hello
        who: nobody
    - context:
        who: everyone
    - mode: '0640'
    - require:
      - file: {{ work }}/conf

{{ work }}/conf/static:
  file.managed:
    - source: salt://app/static.txt

{{ work }}/conf/inline:
  file.managed:
    - contents:
      - first
      - second
    - mode: 600

{{ work }}/conf/existing:
  file.managed:
    - contents: |
        one
        TWO
        three

{{ work }}/deep/er/file:
  file.managed:
    - contents: deep
    - makedirs: True

{{ work }}/noparent/file:
  file.managed:
    - contents: x

{{ work }}/missing_source:
  file.managed:
    - source: salt://app/nope.txt

{{ work }}/either:
  file.managed:
    - source:
      - salt://app/nope.txt
      - salt://app/static.txt

{{ work }}/relative_conflict:
  file.managed:
    - source: salt://app/static.txt
    - contents: both

relative/path:
  file.managed:
    - contents: x

{{ work }}/empty:
  file.managed: []

{{ work }}/gone:
  file.absent: []

{{ work }}/old_dir:
  file.absent: []

{{ work }}/newdir/sub:
  file.directory:
    - makedirs: True

{{ work }}/nodir/sub:
  file.directory: []

{{ work }}/conf/existing_keep:
  file.managed:
    - contents: changed
    - replace: False

restart_on_change:
  cmd.wait:
    - name: echo restarted
    - watch:
      - file: {{ work }}/conf/motd
