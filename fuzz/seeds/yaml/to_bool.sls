a: {{ pillar.app.debug|to_bool }}
b: {{ 'no'|to_bool }}
c: {{ 0|to_bool }}
d: {{ none|to_bool }}
