include:
  - orch.common
{% set targets = ['web*', 'db*'] %}
{% for t in targets %}
apply-{{ loop.index }}:
  salt.state:
    - tgt: '{{ t }}'
    - sls: web
    - require:
      - salt: ping
{% endfor %}
notify:
  salt.function:
    - name: test.echo
    - tgt: '*'
    - arg: [done]
    - require_in:
      - salt: apply-1
