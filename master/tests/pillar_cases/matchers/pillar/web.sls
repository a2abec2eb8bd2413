order: [web]
web:
  port: 80
  vhosts:
    - {{ grains['id'] }}.example.com
