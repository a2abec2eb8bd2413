port: {{ salt['pillar.get']('nginx:sites:api:port') }}
missing: {{ salt['pillar.get']('nginx:sites:x:port', 99) }}
empty: '{{ salt['pillar.get']('nope') }}'
