data: {{ pillar.users|json }}
