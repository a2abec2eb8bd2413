{% set d = {'a': {'x': 1, 'y': [1]}, 'b': 2} %}
{% set r = salt['defaults.merge'](d, {'a': {'y': [2], 'z': 3}}) %}
d: {{ d|tojson }}
r: {{ r|tojson }}
