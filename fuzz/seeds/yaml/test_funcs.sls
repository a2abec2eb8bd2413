t: {{ salt['test.true']() }}
f: {{ salt['test.false']() }}
e: {{ salt['test.echo']('hi') }}
