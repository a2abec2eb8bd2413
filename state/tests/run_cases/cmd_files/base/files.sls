{% set work = grains.work %}
# Plain file commands, as a tree writes them: each guarded as it would be, some failing.
make_dirs:
  cmd.run:
    - name: mkdir -p {{ work }}/app/conf {{ work }}/app/data
    - creates: {{ work }}/app/conf

mark_done:
  cmd.run:
    - name: touch {{ work }}/app/.done
    - unless: test -e {{ work }}/app/.done
    - require:
      - cmd: make_dirs

mark_again:
  cmd.run:
    - name: touch {{ work }}/app/.done
    - unless: test -e {{ work }}/app/.done
    - require:
      - cmd: mark_done

link_current:
  cmd.run:
    - name: ln -sfn {{ work }}/app/conf {{ work }}/current

copy_conf:
  cmd.run:
    - name: cp {{ work }}/app/.done '{{ work }}/app/conf/with space'

lock_down:
  cmd.run:
    - name: chmod 0700 {{ work }}/app/data
    - onchanges:
      - cmd: make_dirs

move_it:
  cmd.run:
    - name: mv '{{ work }}/app/conf/with space' {{ work }}/app/conf/moved

owner:
  cmd.run:
    - name: chown root:root {{ work }}/app/conf/moved

group:
  cmd.run:
    - name: chgrp root {{ work }}/app/conf/moved

touch_missing_dir:
  cmd.run:
    - name: touch {{ work }}/nowhere/x

rm_missing:
  cmd.run:
    - name: rm {{ work }}/app/gone

after_failure:
  cmd.run:
    - name: rmdir {{ work }}/app/data
    - onfail:
      - cmd: rm_missing

bad_option:
  cmd.run:
    - name: mkdir --no-such-option {{ work }}/x

cleanup_twice:
  cmd.run:
    - names:
      - rm -f {{ work }}/app/conf/moved
      - rm -f {{ work }}/app/conf/moved
