a: {{ missing.attr }}
