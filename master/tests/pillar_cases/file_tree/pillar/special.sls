special: {{ pillar.get("role") }}
