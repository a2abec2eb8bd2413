{% set work = grains['work'] %}
clone_head:
  git.latest:
    - name: file://{{ work }}/up
    - target: {{ work }}/clone1

clone_dev:
  git.latest:
    - name: file://{{ work }}/up
    - target: {{ work }}/clone2
    - rev: dev
    - branch: dev

clone_tag:
  git.latest:
    - name: file://{{ work }}/up
    - target: {{ work }}/clone3
    - rev: v1

clone_depth:
  git.latest:
    - name: file://{{ work }}/up
    - target: {{ work }}/clone4
    - rev: main
    - depth: 2
    - remote: upstream

clone_full:
  git.latest:
    - name: file://{{ work }}/up
    - target: {{ work }}/clone8

not_a_repo:
  git.latest:
    - name: file://{{ work }}/up
    - target: {{ work }}/notrepo

a_file:
  git.latest:
    - name: file://{{ work }}/up
    - target: {{ work }}/afile

forced:
  git.latest:
    - name: file://{{ work }}/up
    - target: {{ work }}/forced
    - force_clone: True

bad_url:
  git.latest:
    - name: file://{{ work }}/nowhere
    - target: {{ work }}/bad

relative:
  git.latest:
    - name: file://{{ work }}/up
    - target: relative/path

no_such_rev:
  git.latest:
    - name: file://{{ work }}/up
    - target: {{ work }}/clone5
    - rev: nosuchbranch

depth_sha:
  git.latest:
    - name: file://{{ work }}/up
    - target: {{ work }}/clone6
    - depth: 1

bad_force_reset:
  git.latest:
    - name: file://{{ work }}/up
    - target: {{ work }}/clone7
    - force_reset: maybe

upstream_moves:
  cmd.run:
    - name: printf 'three\n' > b.txt && git add b.txt && git commit -q -m third
    - cwd: {{ work }}/up
    - unless: test -f {{ work }}/up/b.txt
    - env:
      - GIT_CONFIG_GLOBAL: /dev/null
      - GIT_AUTHOR_NAME: Up Stream
      - GIT_AUTHOR_EMAIL: up@example.com
      - GIT_COMMITTER_NAME: Up Stream
      - GIT_COMMITTER_EMAIL: up@example.com
      - GIT_AUTHOR_DATE: 2024-01-03T03:04:05Z
      - GIT_COMMITTER_DATE: 2024-01-03T03:04:05Z

update_head:
  git.latest:
    - name: file://{{ work }}/up
    - target: {{ work }}/clone1

update_branch:
  git.latest:
    - name: file://{{ work }}/up
    - target: {{ work }}/clone2
    - rev: main
    - branch: main

no_update_head:
  git.latest:
    - name: file://{{ work }}/up
    - target: {{ work }}/clone8
    - update_head: False
