os: {{ salt['grains.get']('os') }}
ip: {{ salt['grains.get']('ipv4:1') }}
none: {{ salt['grains.get']('nothing', 'dflt') }}
