{% set work = grains.work %}
src-list-first-existing:
  file.managed:
    - name: {{ work }}/src_list
    - source:
      - salt://edge/nope1
      - salt://edge/nope2
      - salt://edge/plain.txt

src-list-none:
  file.managed:
    - name: {{ work }}/src_list_none
    - source:
      - salt://edge/nope1
      - salt://edge/nope2

src-local-skip-verify:
  file.managed:
    - name: {{ work }}/from_local
    - source: {{ work }}/local_src.txt
    - skip_verify: True

src-local-file-url:
  file.managed:
    - name: {{ work }}/from_file_url
    - source: file://{{ work }}/local_src.txt

contents-list:
  file.managed:
    - name: {{ work }}/contents_list
    - contents:
      - one
      - two
      - three

contents-nonl:
  file.managed:
    - name: {{ work }}/contents_nonl
    - contents: no newline
    - contents_newline: False

contents-nonl-same:
  file.managed:
    - name: {{ work }}/same_nonl
    - contents: same
    - contents_newline: False

contents-multiline-nonl:
  file.managed:
    - name: {{ work }}/contents_ml_nonl
    - contents: |
        a
        b
    - contents_newline: False

contents-int:
  file.managed:
    - name: {{ work }}/contents_int
    - contents: 42

noreplace-existing:
  file.managed:
    - name: {{ work }}/noreplace
    - contents: replaced?
    - replace: False
    - mode: '0644'

noreplace-new:
  file.managed:
    - name: {{ work }}/noreplace_new
    - contents: created
    - replace: False

follow-link:
  file.managed:
    - name: {{ work }}/link_to_target
    - contents: via link
    - mode: '0640'

dirmode-makedirs:
  file.managed:
    - name: {{ work }}/mk/a/b/file
    - contents: x
    - makedirs: True
    - dir_mode: '0750'
    - mode: '0600'

mode-makedirs:
  file.managed:
    - name: {{ work }}/mk2/c/file
    - contents: x
    - makedirs: True
    - mode: '0640'

nocreate-missing:
  file.managed:
    - name: {{ work }}/nocreate_missing
    - contents: x
    - create: False

nocreate-existing:
  file.managed:
    - name: {{ work }}/nocreate_existing
    - contents: new
    - create: False

tpl-defaults-context:
  file.managed:
    - name: {{ work }}/tpl_out
    - source: salt://edge/tpl.jinja
    - template: jinja
    - defaults:
        greeting: hi
        who: nobody
        extra: def
    - context:
        who: somebody

tpl-contents:
  file.managed:
    - name: {{ work }}/tpl_contents
    - contents: '{{ "{{" }} a {{ "}}" }}-{{ "{{" }} b {{ "}}" }}'
    - template: jinja
    - defaults:
        a: 1
        b: 2
    - context:
        b: 3

check-cmd-ok:
  file.managed:
    - name: {{ work }}/check_ok
    - contents: fine
    - check_cmd: /bin/true

check-cmd-fail:
  file.managed:
    - name: {{ work }}/check_fail
    - contents: bad
    - check_cmd: /bin/false

tmp-ext:
  file.managed:
    - name: {{ work }}/tmp_ext
    - contents: with ext
    - tmp_ext: .txt

ser-check-fail:
  file.serialize:
    - name: {{ work }}/check_fail.json
    - serializer: json
    - dataset: {a: 1}
    - check_cmd: /bin/false

check-cmd-echo:
  file.managed:
    - name: {{ work }}/check_echo
    - contents: y
    - check_cmd: 'sh -c "echo out; echo err >&2; exit 3" --'
    - tmp_ext: .conf

empty-denied:
  file.managed:
    - name: {{ work }}/empty_denied
    - contents: ''
    - allow_empty: False

empty-allowed:
  file.managed:
    - name: {{ work }}/empty_allowed
    - contents: ''

dump:
  cmd.run:
    - name: cd {{ work }} && for f in $(find . -path ./.cache -prune -o \( -type f -o -type l \) -print | sort); do echo "== $f $(stat -c '%a %F' $f)"; cat -A $f; echo; done; find . -path ./.cache -prune -o -type d -printf '%p %m\n' | sort
    - order: last
