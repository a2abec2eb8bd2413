items:
{% for s in ['a', 'b', 'c'] %}
  - {{ loop.index }}-{{ s }}-{{ loop.first }}-{{ loop.last }}
{% endfor %}
