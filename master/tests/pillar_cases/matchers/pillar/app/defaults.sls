level: {{ level }}
format: json
