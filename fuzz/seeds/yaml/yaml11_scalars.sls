a: yes
b: off
c: 0755
d: 1:30
e: ~
f: 1.5e3
g: 1e3
h: '007'
