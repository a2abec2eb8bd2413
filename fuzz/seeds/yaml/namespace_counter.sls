{% set ns = namespace(n=0) %}
{% for u in pillar.users %}{% set ns.n = ns.n + 1 %}{% endfor %}
count: {{ ns.n }}
