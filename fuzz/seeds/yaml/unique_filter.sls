v: {{ pillar.app.tags|unique|tojson }}
