db:
  engine: postgres
  replicas: {{ [1, 2, 3] | length }}
