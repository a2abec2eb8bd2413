a: {{ 'web01'|regex_search('web(\\d+)') | tojson }}
b: {{ 'web01'|regex_match('db') | tojson }}
c: {{ 'a.b.c'|regex_replace('\\.', '-') }}
d: {{ 'HELLO'|regex_search('hello', ignorecase=True) | tojson }}
