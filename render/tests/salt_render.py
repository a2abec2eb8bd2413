"""Render every case of the corpus with Salt's own renderer pipeline and print the results as
JSON: {case: {"data": ...} | {"error": "..."}}. Usage: salt_render.py CORPUS_DIR"""
import json
import os
import sys
import tempfile

import salt.config
import salt.loader
import salt.template


def main():
    corpus = os.path.abspath(sys.argv[1])
    ctx = json.load(open(os.path.join(corpus, "_context.json")))
    cache = tempfile.mkdtemp()
    opts = salt.config.minion_config(None)
    opts.update(
        file_client="local",
        file_roots={"base": [corpus]},
        cachedir=cache,
        grains=ctx["grains"],
        pillar=ctx["pillar"],
        id="minion1",
    )
    mods = salt.loader.minion_mods(opts)
    rend = salt.loader.render(opts, mods)
    out = {}
    for name in sorted(os.listdir(corpus)):
        if not name.endswith(".sls"):
            continue
        sls = name[: -len(".sls")]
        try:
            data = salt.template.compile_template(
                os.path.join(corpus, name), rend, "jinja|yaml", opts["renderer_blacklist"],
                opts["renderer_whitelist"], saltenv="base", sls=sls,
            )
            if hasattr(data, "read"):
                data = data.read()
            out[sls] = {"data": json.loads(json.dumps(data, default=str))}
        except Exception as exc:  # the case's error, compared only as "failed"
            out[sls] = {"error": str(exc)}
    json.dump(out, sys.stdout)


main()
