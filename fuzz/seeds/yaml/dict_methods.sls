{% set d = {'b': 2, 'a': 1} %}
keys: {{ d.keys()|list|tojson }}
values: {{ d.values()|list|tojson }}
items: {% for k, v in d.items() %}{{ k }}={{ v }} {% endfor %}
get: {{ d.get('zz', 'none') }}
pop: {{ d.pop('b') }}
left: {{ d|tojson }}
