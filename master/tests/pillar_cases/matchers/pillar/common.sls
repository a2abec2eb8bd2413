{% set mem = grains['mem_total'] %}
common:
  id: {{ grains['id'] }}
  big: {{ mem > 1024 }}
  saltenv: {{ saltenv }}
  sls: {{ sls }}
  roles: {{ grains.get('roles', []) | json }}
  from_config: {{ salt['config.get']('pillar_source_merging_strategy') }}
order: [common]
