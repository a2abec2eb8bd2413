gone-running:
  service.running:
    - name: brinetest-a
gone-dead:
  service.dead:
    - name: brinetest-b
gone-enabled:
  service.enabled:
    - name: brinetest-a
gone-disabled:
  service.disabled:
    - name: brinetest-b
