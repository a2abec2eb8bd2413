u: {{ nosuchvar.attr }}
