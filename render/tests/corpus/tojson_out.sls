data: {{ pillar.nginx|tojson }}
