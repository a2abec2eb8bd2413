a: {{ pillar.get('nothing')|default('d', true) }}
b: {{ undefined_var|default('u') }}
