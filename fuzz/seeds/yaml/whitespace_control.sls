list:
{%- for s in pillar.ntp.servers %}
  - {{ s }}
{%- endfor %}
