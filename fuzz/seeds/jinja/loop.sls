{% set users = pillar.get('users', {}) %}
{% for name, u in users.items() %}
user_{{ name }}:
  user.present:
    - name: {{ name }}
    - uid: {{ u.uid | default(1000) }}
{% endfor %}
{% if grains['os'] == 'Debian' %}
pkgs:
  pkg.installed:
    - pkgs: {{ ['vim', 'curl'] | json }}
{% endif %}
