{% for name, user in salt['pillar.get']('users', {}).items() %}
user_{{ name }}:
  user.present:
    - name: {{ name }}
    - uid: {{ user.uid }}
    - shell: {{ user.get('shell', '/bin/bash') }}
{%- if user.groups is defined %}
    - groups: {{ user.groups|tojson }}
{%- endif %}
{% endfor %}
