{%- set w = grains.work %}
animals-1:
  file.accumulated:
    - name: animals
    - filename: {{ w }}/fox.txt
    - text:
      - ' jumps'
      - ' runs'
    - require_in:
      - file: fox

animals-2:
  file.accumulated:
    - name: animals
    - filename: {{ w }}/fox.txt
    - text: ' runs'
    - watch_in:
      - file: fox

plants:
  file.accumulated:
    - filename: {{ w }}/fox.txt
    - text:
        kind: tree
        name: oak
    - require_in:
      - file: fox

fox:
  file.managed:
    - name: {{ w }}/fox.txt
    - template: jinja
    - source: salt://fox.tmpl

fox-contents:
  file.managed:
    - name: {{ w }}/fox-contents.txt
    - template: jinja
    - contents: 'accumulators: {{ "{{" }} accumulator is defined {{ "}}" }}'
    - require:
      - file: fox

zone-a-lines:
  file.accumulated:
    - filename: {{ w }}/zones.conf
    - text:
      - line one
      - line two
    - require_in:
      - file: zone-a

zone-b-lines:
  file.accumulated:
    - filename: {{ w }}/zones.conf
    - text: only b
    - require_in:
      - file: zone-b

zone-a:
  file.blockreplace:
    - name: {{ w }}/zones.conf
    - marker_start: '# -- start a --'
    - marker_end: '# -- end a --'
    - content: first
    - append_if_not_found: True

zone-b:
  file.blockreplace:
    - name: {{ w }}/zones.conf
    - marker_start: '# -- start b --'
    - marker_end: '# -- end b --'
    - show_changes: True

orphan:
  file.accumulated:
    - filename: {{ w }}/fox.txt
    - text: nobody reads this

no-text:
  file.accumulated:
    - filename: {{ w }}/fox.txt
    - text: null

show:
  cmd.run:
    - name: cat {{ w }}/fox.txt {{ w }}/fox-contents.txt {{ w }}/zones.conf
    - order: last
