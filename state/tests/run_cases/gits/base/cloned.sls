{%- set w = grains.work %}
# git.cloned (the git_cloned cases): clones, branches, and what is in the way.
plain:
  git.cloned:
    - name: {{ w }}/up
    - target: {{ w }}/cloned/plain

on-dev:
  git.cloned:
    - name: {{ w }}/up
    - target: {{ w }}/cloned/dev
    - branch: dev

switch-to-dev:
  git.cloned:
    - name: {{ w }}/up
    - target: {{ w }}/cloned/plain
    - branch: dev
    - require:
      - git: plain

back-to-main:
  git.cloned:
    - name: {{ w }}/up
    - target: {{ w }}/cloned/dev
    - branch: main
    - require:
      - git: on-dev

no-such-branch:
  git.cloned:
    - name: {{ w }}/up
    - target: {{ w }}/cloned/plain
    - branch: nowhere
    - require:
      - git: switch-to-dev

not-a-repo:
  git.cloned:
    - name: {{ w }}/up
    - target: {{ w }}/notrepo

relative:
  git.cloned:
    - name: {{ w }}/up
    - target: cloned/rel

empty-branch:
  git.cloned:
    - name: {{ w }}/up
    - target: {{ w }}/cloned/x
    - branch: ''

bad-source:
  git.cloned:
    - name: {{ w }}/nothing-here
    - target: {{ w }}/cloned/bad

null-target:
  git.cloned:
    - name: {{ w }}/up
    - target: null
