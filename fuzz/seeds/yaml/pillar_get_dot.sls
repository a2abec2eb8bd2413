servers: {{ salt.pillar.get('ntp:servers', []) | tojson }}
