a_running:
  service.running:
    - name: brinetest-a

a_again:
  service.running:
    - name: brinetest-a
    - require:
      - service: a_running

b_dead:
  service.dead:
    - name: brinetest-b

a_config:
  cmd.run:
    - name: "true"

a_watch:
  service.running:
    - name: brinetest-a
    - watch:
      - cmd: a_config

a_enabled:
  service.enabled:
    - name: brinetest-a

b_disabled:
  service.disabled:
    - name: brinetest-b

b_running_enabled:
  service.running:
    - name: brinetest-b
    - enable: False
    - require:
      - service: b_disabled

missing_running:
  service.running:
    - name: no-such-service-brine

missing_dead:
  service.dead:
    - name: no-such-service-brine

typo:
  service.running:
    - name: brinetest-a
    - enabled: True

a_stopped:
  service.dead:
    - name: brinetest-a
    - require:
      - service: a_watch

b_stopped:
  service.dead:
    - name: brinetest-b
    - require:
      - service: b_running_enabled
