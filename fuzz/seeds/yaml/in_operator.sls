a: {{ 'web' in grains.roles }}
b: {{ 'sites' in pillar.nginx }}
c: {{ 'x' in 'xyz' }}
