{% set m = salt['grains.filter_by']({'db': 'postgres', 'web': 'nginx'}, grain='roles') %}
v: {{ m }}
