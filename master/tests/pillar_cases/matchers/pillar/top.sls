base:
  '*':
    - common
  'web*':
    - web
  'os_family:Debian':
    - match: grain
    - debian
  'os:(Rocky|CentOS)':
    - match: grain_pcre
    - redhat
  'G@role:db and not web2':
    - db
  'web1,db1':
    - match: list
    - listed
  '^web[0-9]$':
    - match: pcre
    - pcre_web
  '10.0.0.0/8':
    - match: ipcidr
    - tenet
  'dbs':
    - match: nodegroup
    - nodegroup_dbs
  'N@webs and G@os:Ubuntu':
    - ubuntu_web
  'roles:cache':
    - match: grain
    - cache
  'other':
    - 'users.*'
  '*1':
    - order: -1
    - app
