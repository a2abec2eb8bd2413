data:
  {{ pillar.nginx.sites|yaml(False)|indent(2) }}
