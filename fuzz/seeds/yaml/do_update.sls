{% set d = {} %}
{% do d.update({'a': 1}) %}
{% do d.update(b=2) %}
d: {{ d|tojson }}
