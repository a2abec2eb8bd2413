e: {{ 'hello world'|base64_encode }}
d: {{ 'aGVsbG8='|base64_decode }}
