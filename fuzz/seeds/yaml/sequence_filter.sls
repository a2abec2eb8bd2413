a: {{ 'x'|sequence|tojson }}
b: {{ ['y']|sequence|tojson }}
