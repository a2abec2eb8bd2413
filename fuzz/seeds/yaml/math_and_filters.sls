a: {{ (grains.mem_total / 1024)|round(1) }}
b: {{ grains.num_cpus * 2 }}
c: {{ [3, 1, 2]|sort|join(',') }}
d: {{ pillar.app.tags|length }}
e: {{ 'abc'|upper }}
f: {{ [1, 2, 3]|sum }}
g: {{ pillar.users|list|tojson }}
