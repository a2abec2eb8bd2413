{%- set repo = grains.work ~ '/repo' %}
new-key:
  git.config_set:
    - name: user.name
    - value: Brine Test
    - repo: {{ repo }}

kept:
  git.config_set:
    - name: brine.kept
    - value: same
    - repo: {{ repo }}

changed:
  git.config_set:
    - name: brine.kept
    - value: 42
    - repo: {{ repo }}

many-as-list:
  git.config_set:
    - name: brine.many
    - multivar:
      - one
      - three
    - repo: {{ repo }}

many-as-text:
  git.config_set:
    - name: brine.more
    - multivar: a,b,c
    - repo: {{ repo }}

both:
  git.config_set:
    - name: brine.both
    - value: x
    - multivar: [y]
    - repo: {{ repo }}

no-repo:
  git.config_set:
    - name: brine.norepo
    - value: x

bad-argument:
  git.config_set:
    - name: brine.bad
    - value: x
    - repo: {{ repo }}
    - bogus: 1

