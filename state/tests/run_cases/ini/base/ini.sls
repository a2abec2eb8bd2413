{%- set w = grains.work %}
# Top-level options and sections (a commented-out option replaced in place, a duplicate
# option set, a new section), not strict.
main present:
  ini.options_present:
    - name: {{ w }}/main.ini
    - sections:
        name: demo
        debug: 'false'
        newtop: 1
        server:
          port: 8080
          host: localhost
          dup: third
        newsec:
          key: value with spaces
          flag: True

# Already set.
main unchanged:
  ini.options_present:
    - name: {{ w }}/main.ini
    - sections:
        name: demo
        server:
          host: localhost

# strict: the top-level option, the section and the key not given are removed.
strict present:
  ini.options_present:
    - name: {{ w }}/strict.ini
    - strict: True
    - sections:
        top1: a
        keep:
          k1: v1
          k3: v3

colon separator:
  ini.options_present:
    - name: {{ w }}/colon.ini
    - separator: ':'
    - sections:
        db:
          user: root
          host: db1

no spaces:
  ini.options_present:
    - name: {{ w }}/nospace.ini
    - no_spaces: True
    - sections:
        s:
          c: 3

# A file that does not exist yet.
new file:
  ini.options_present:
    - name: {{ w }}/created.ini
    - sections:
        top: 1
        sec:
          k: v

# No sections: the file is only written again.
no sections:
  ini.options_present:
    - name: {{ w }}/normalize.ini

# A change named "error" fails, as in Salt.
change named error:
  ini.options_present:
    - name: {{ w }}/errors.ini
    - sections:
        error: 1

# Removing the last option of a section, a missing and an empty option.
absent keys:
  ini.options_absent:
    - name: {{ w }}/remove.ini
    - sections:
        only:
          - last
        multi:
          - a
          - missing
          - empty

# A section that is not one: the option is removed from outside any section.
absent top-level:
  ini.options_absent:
    - name: {{ w }}/remove.ini
    - sections:
        nosuch:
          - lone

absent missing file:
  ini.options_absent:
    - name: {{ w }}/absent-missing.ini
    - sections:
        s:
          - k

sections gone:
  ini.sections_absent:
    - name: {{ w }}/sections.ini
    - sections:
        - b
        - c
        - nope

sections missing file:
  ini.sections_absent:
    - name: {{ w }}/sections-missing.ini
    - sections:
        - a
