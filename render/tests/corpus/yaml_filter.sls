data: {{ pillar.users|yaml }}
