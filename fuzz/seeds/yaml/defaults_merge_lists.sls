{% set d = {'l': [1, 2]} %}
{% set r = salt['defaults.merge'](d, {'l': [2, 3]}, merge_lists=True, in_place=False) %}
d: {{ d|tojson }}
r: {{ r|tojson }}
