a: {{ 'a,b,c'.split(',') | tojson }}
b: {{ '  x  '.strip() }}
c: {{ 'Hello'.upper() }} {{ 'Hello'.lower() }}
d: {{ 'web1.example.com'.startswith('web') }}
e: {{ 'file.conf'.endswith(('.conf', '.cfg')) }}
f: {{ 'a-b-c'.replace('-', '_') }}
g: {{ '-'.join(['x', 'y']) }}
h: {{ '{0}:{1}'.format('host', 80) }}
i: {{ 'one two  three'.split() | tojson }}
j: {{ 'a.b.c'.rsplit('.', 1) | tojson }}
k: {{ 'hello world'.title() }}
