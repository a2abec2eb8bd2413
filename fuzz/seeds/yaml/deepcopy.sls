{% set a = {'k': [1]} %}
{% set b = salt['defaults.deepcopy'](a) %}
{% do b.k.append(2) %}
a: {{ a|tojson }}
b: {{ b|tojson }}
