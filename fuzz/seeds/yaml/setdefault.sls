{% set groups = {} %}
{% for user, u in pillar.users|dictsort %}
{% for g in u.get('groups', []) %}
{% set _ = groups.setdefault(g, []) %}
{% do groups[g].append(user) %}
{% endfor %}
{% endfor %}
groups: {{ groups|tojson }}
