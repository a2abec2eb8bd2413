{%- set ak = grains.work ~ '/authorized_keys' %}
bare-key-with-comment:
  ssh_auth.present:
    - name: a2V5LXRocmVlLTAwMA== a comment with words
    - user: root
    - enc: ed25519
    - config: {{ ak }}

full-line:
  ssh_auth.present:
    - name: 'no-pty,from="10.0.0.1" ssh-ed25519 a2V5LWZvdXItMDAwMA== me@host'
    - user: root
    - config: {{ ak }}

changed-comment:
  ssh_auth.present:
    - name: a2V5LW9uZS0wMDAw
    - user: root
    - comment: new-comment
    - config: {{ ak }}

unchanged-options:
  ssh_auth.present:
    - name: a2V5LXR3by0wMDAwMA==
    - user: root
    - enc: ssh-ed25519
    - comment: with options
    - options:
      - command="ls"
      - no-pty
    - config: {{ ak }}

several:
  ssh_auth.present:
    - user: root
    - config: {{ ak }}
    - names:
      - ssh-rsa a2V5LWZpdmUtMDAwMDA= from-file
      - a2V5LXNpeC0wMDAwMDA=

from-file:
  ssh_auth.present:
    - name: team keys
    - user: root
    - source: {{ grains.work }}/team.pub
    - config: {{ ak }}

from-empty-file:
  ssh_auth.present:
    - name: nothing
    - user: root
    - source: {{ grains.work }}/empty.pub
    - config: {{ ak }}

not-base64:
  ssh_auth.present:
    - name: 'not!base64'
    - user: root
    - config: {{ ak }}

no-such-user:
  ssh_auth.present:
    - name: a2V5LXRocmVlLTAwMA==
    - user: brine-no-such-user
    - config: {{ ak }}

gone:
  ssh_auth.absent:
    - name: ssh-dss a2V5LXNldmVuLTAwMDA= second
    - user: root
    - config: {{ ak }}

already-gone:
  ssh_auth.absent:
    - name: bmV2ZXItdGhlcmUtMA==
    - user: root
    - config: {{ ak }}

gone-from-file:
  ssh_auth.absent:
    - name: team keys
    - user: root
    - source: {{ grains.work }}/team.pub
    - config: {{ ak }}
    - require:
      - ssh_auth: from-file

only-these:
  ssh_auth.manage:
    - user: root
    - config: {{ grains.work }}/managed_keys
    - ssh_keys:
      - ssh-rsa a2V5LW9uZS0wMDAw keep
      - a2V5LWZvdXItMDAwMA== added
