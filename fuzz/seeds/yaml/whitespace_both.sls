{%- set x = 1 -%}
a: {{ x }}
{%- if x == 1 %}
b: 2
{%- endif %}
