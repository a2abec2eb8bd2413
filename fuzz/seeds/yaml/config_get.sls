id: {{ salt['config.get']('id') }}
ntp: {{ salt['config.get']('ntp:servers:0') }}
mem: {{ salt['config.get']('mem_total') }}
