{% set m = salt['grains.filter_by']({'common': {'a': 1, 'b': 2}, 'Debian': {'b': 3}}, base='common') %}
data: {{ m|tojson }}
