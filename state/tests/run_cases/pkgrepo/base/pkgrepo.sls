{%- set d = '/etc/apt/sources.list.d/brine-test-' %}
new-repo:
  pkgrepo.managed:
    - name: deb http://127.0.0.1:9/brine-a bookworm main
    - file: {{ d }}a.list
    - refresh: False
    - comments:
      - first
      - second

disabled-repo:
  pkgrepo.managed:
    - name: deb [arch=amd64] http://127.0.0.1:9/brine-b stable main
    - file: {{ d }}b.list
    - disabled: True
    - refresh: False

more-comps:
  pkgrepo.managed:
    - name: deb http://127.0.0.1:9/brine-old bookworm main
    - comps: main,contrib
    - refresh: False

same-repo:
  pkgrepo.managed:
    - name: deb [arch=amd64] http://127.0.0.1:9/brine-same stable main
    - refresh: False

clean-file:
  pkgrepo.managed:
    - name: deb http://127.0.0.1:9/brine-c bookworm main
    - file: {{ d }}c.list
    - clean_file: True
    - refresh: False

signed:
  pkgrepo.managed:
    - name: deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://127.0.0.1:9/brine-d bookworm main
    - file: {{ d }}d.list
    - aptkey: False
    - refresh: False

unsigned-without-apt-key:
  pkgrepo.managed:
    - name: deb http://127.0.0.1:9/brine-e bookworm main
    - file: {{ d }}e.list
    - aptkey: False
    - refresh: False

both-enabled-and-disabled:
  pkgrepo.managed:
    - name: deb http://127.0.0.1:9/brine-f bookworm main
    - enabled: True
    - disabled: False

repo-argument:
  pkgrepo.managed:
    - name: deb http://127.0.0.1:9/brine-f bookworm main
    - repo: deb http://127.0.0.1:9/brine-f bookworm main

not-a-definition:
  pkgrepo.managed:
    - name: http://127.0.0.1:9/brine-f bookworm main
    - refresh: False

keyid-without-keyserver:
  pkgrepo.managed:
    - name: deb http://127.0.0.1:9/brine-g bookworm main
    - file: {{ d }}g.list
    - keyid: 0A1B2C3D
    - refresh: False

insecure-key-refused:
  pkgrepo.managed:
    - name: deb http://127.0.0.1:9/brine-h bookworm main
    - key_url: http://127.0.0.1:9/key.gpg
    - allow_insecure_key: False

absent-already:
  pkgrepo.absent:
    - name: deb http://127.0.0.1:9/brine-nothing bookworm main

absent-other-arch:
  pkgrepo.absent:
    - name: deb [arch=arm64] http://127.0.0.1:9/brine-same stable main

lists:
  cmd.run:
    - name: for f in /etc/apt/sources.list.d/brine-test-*.list; do echo "== $f"; cat "$f"; done
    - order: last
