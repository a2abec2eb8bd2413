good: {ok: true}
