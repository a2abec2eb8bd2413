{% set l = [] %}
{% for i in range(3) %}{% do l.append(i * 2) %}{% endfor %}
{% do l.extend([7, 8]) %}
{% do l.insert(0, 'first') %}
l: {{ l|tojson }}
popped: {{ l.pop() }}
after: {{ l|tojson }}
idx: {{ l.index(2) }}
